"""CLI commands of the metrics area: `oomrl metrics`, `oomrl report` and `oomrl diagnose`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from oomrl.ops.commands import AccountOption, Benchmark, parse_day, valid_account


def _finite_rate(value: float) -> float:
    """Option callback: NaN or infinity is no rate (a report would be written full of NaN)."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite annual rate, got {value}")
    return value


RfOption = Annotated[
    float,
    typer.Option(
        "--rf", metavar="RATE", callback=_finite_rate, help="Annual risk-free rate, as a fraction."
    ),
]


def _print_metrics(values: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(values))
        return
    from oomrl.metrics.labels import label
    from oomrl.metrics.tearsheet import format_value
    from oomrl.ops.commands.tables import output_console, rows_table

    rows = [
        {"metric": key, "label": label(key).heading, "value": format_value(key, value)}
        for key, value in values.items()
    ]
    output_console().print(rows_table(rows, None, {"value"}))


def metrics_command(
    returns: Path = typer.Option(
        ...,
        "--returns",
        metavar="CSV",
        help="Daily series: a `date` column and `return` (or `close`).",
    ),
    benchmark: Path = typer.Option(
        ...,
        "--benchmark",
        metavar="CSV",
        help="Benchmark series: a `date` column and `return` (or `close`).",
    ),
    rf: RfOption = 0.0,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (fractions)."),
    start: str | None = typer.Option(
        None,
        "--start",
        metavar="DATE",
        help="First date to include "
        "(returns of a `close` file still use the previous session's close).",
    ),
    end: str | None = typer.Option(None, "--end", metavar="DATE", help="Last date to include."),
) -> None:
    """Compute performance against a benchmark.

    Daily returns in, metrics out as fractions, 252 sessions a year.
    """
    import pandas as pd

    from oomrl.metrics.io import read_returns_csv, window
    from oomrl.metrics.performance import compute_metrics

    first, last = parse_day(start, "--start"), parse_day(end, "--end")
    series = window(
        read_returns_csv(returns, "returns"),
        first and pd.Timestamp(first),
        last and pd.Timestamp(last),
        "returns",
    )
    _print_metrics(
        compute_metrics(series, read_returns_csv(benchmark, "benchmark"), rf=rf), as_json
    )


def report_command(
    account: AccountOption = None,
    returns: Path | None = typer.Option(
        None,
        "--returns",
        metavar="CSV",
        help="Report a plain return or close series instead of an account.",
    ),
    phases: Path | None = typer.Option(
        None, "--phases", metavar="FILE", help="CSV or YAML of name,start,end windows."
    ),
    benchmark: Benchmark = typer.Option(
        Benchmark.price, "--benchmark", help="Which CSI 300 series to compare with."
    ),
    benchmark_csv: Path | None = typer.Option(
        None,
        "--benchmark-csv",
        metavar="CSV",
        help="With --returns: a benchmark series (default: none).",
    ),
    rf: RfOption = 0.0,
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="DIR",
        help="Folder for the report (default: a new folder under OOMRL_HOME/runs).",
    ),
) -> None:
    """Write the tearsheet (HTML, PNG, Markdown).

    Prints the paths of the files written.
    """
    from oomrl.metrics.attribution import account_report, report_dir
    from oomrl.metrics.io import read_returns_csv
    from oomrl.metrics.performance import read_phases
    from oomrl.metrics.tearsheet import build_report
    from oomrl.settings import get_settings

    settings = get_settings()
    if (account is None) == (returns is None):  # a usage error: exit 2, like typer's own
        raise typer.BadParameter(
            "give exactly one of --account or --returns", param_hint="--account / --returns"
        )
    windows = read_phases(phases) if phases else None
    if returns is not None:
        folder = out or report_dir(settings.store.runs_dir, returns.stem)
        bench = read_returns_csv(benchmark_csv, "benchmark") if benchmark_csv else None
        series = read_returns_csv(returns, "returns")
        paths = build_report(
            series,
            folder,
            benchmark=bench,
            benchmark_kind=benchmark.value,
            phases=windows,
            title=returns.stem,
            rf=rf,
        ).paths()
    else:
        from oomrl.data.sample import ensure_sample
        from oomrl.portfolio.ledger import Ledger
        from oomrl.repair.versions import StrategyVersions

        folder = out or report_dir(settings.store.runs_dir, str(account))
        store = ensure_sample(settings)
        ledger = Ledger(settings.ledger_url)
        # a fresh OOMRL_HOME has no tables yet: say "no NAV", not a SQL error
        ledger.create_schema()
        paths = account_report(
            ledger,
            store,
            str(account),
            folder,
            phases=windows,
            benchmark_kind=benchmark.value,
            rf=rf,
            workspace=StrategyVersions(settings.store.workspace_dir),
            runs_dir=settings.store.runs_dir,
        ).paths()
    for path in paths:
        typer.echo(str(path))


def diagnose_command(
    account: str = typer.Option(
        ..., "--account", metavar="NAME", callback=valid_account, help="Ledger account to diagnose."
    ),
    as_of: str = typer.Option(
        ..., "--as-of", metavar="DATE", help="Session to evaluate, YYYY-MM-DD."
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        help="Alert thresholds as TOML, YAML or JSON (default: built in).",
    ),
) -> None:
    """Evaluate the loss-alert rules on one session.

    Prints each new autopsy as JSON, all in one array.
    """
    from oomrl.diagnostics.diagnose import diagnose_account
    from oomrl.settings import get_settings

    settings = get_settings()
    autopsies = diagnose_account(settings, account, as_of, config)
    typer.echo(json.dumps([a.model_dump(mode="json") for a in autopsies], indent=2))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("metrics")(metrics_command)
    app.command("report")(report_command)
    app.command("diagnose")(diagnose_command)
