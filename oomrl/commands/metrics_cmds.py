"""CLI commands of the metrics area: `oomrl metrics`, `oomrl report` and `oomrl diagnose`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from oomrl.commands import run_or_exit


def _print_metrics(values: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(values))
        return
    from rich.console import Console
    from rich.table import Table

    from oomrl.metrics.tearsheet import format_value

    table = Table("metric", "value")
    for key, value in values.items():
        table.add_row(key, format_value(key, value))
    Console().print(table)


def metrics_command(
    returns: Path = typer.Option(..., "--returns", help="CSV with `date` and `return` (or `close`)."),
    benchmark: Path = typer.Option(..., "--benchmark", help="CSV with `date` and `return` (or `close`)."),
    rf: float = typer.Option(0.0, "--rf", help="Annual risk-free rate, as a fraction."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (fractions)."),
    start: str | None = typer.Option(None, "--start", help="First date to include (returns of a `close` "
                                     "file still use the previous session's close)."),
    end: str | None = typer.Option(None, "--end", help="Last date to include."),
) -> None:
    """Performance of a daily return series against a benchmark (DESIGN §4.3 keys, fractions)."""
    from oomrl.metrics.io import read_returns_csv, window
    from oomrl.metrics.performance import compute_metrics

    def body() -> dict[str, Any]:
        r = window(read_returns_csv(returns, "returns"), start, end, "returns")
        b = read_returns_csv(benchmark, "benchmark")
        return compute_metrics(r, b, rf=rf)

    _print_metrics(run_or_exit(body), as_json)


def report_command(
    account: str | None = typer.Option(None, "--account", help="Report this ledger account."),
    returns: Path | None = typer.Option(None, "--returns", help="Or report a plain return/close CSV."),
    phases: Path | None = typer.Option(None, "--phases", help="CSV/YAML of name,start,end windows."),
    benchmark: str = typer.Option("price", "--benchmark", help="CSI 300 index: price or total_return."),
    benchmark_csv: Path | None = typer.Option(None, "--benchmark-csv",
                                              help="With --returns: a benchmark CSV (else none)."),
    rf: float = typer.Option(0.0, "--rf", help="Annual risk-free rate, as a fraction."),
    out: Path | None = typer.Option(None, "--out", help="Folder for the report (default OOMRL_HOME/runs/…)."),
) -> None:
    """Write the HTML tearsheet, PNG charts and Markdown summary, and print their paths."""
    from oomrl.config import get_settings
    from oomrl.metrics.attribution import account_report, report_dir
    from oomrl.metrics.io import MetricsInputError, read_returns_csv
    from oomrl.metrics.performance import read_phases
    from oomrl.metrics.tearsheet import build_report

    settings = get_settings()

    def body() -> list[Path]:
        if (account is None) == (returns is None):
            raise MetricsInputError("give exactly one of --account or --returns")
        windows = read_phases(phases) if phases else None
        if returns is not None:
            folder = out or report_dir(settings.runs_dir, returns.stem)
            bench = read_returns_csv(benchmark_csv, "benchmark") if benchmark_csv else None
            series = read_returns_csv(returns, "returns")
            return build_report(series, folder, benchmark=bench, benchmark_kind=benchmark, phases=windows,
                                title=returns.stem, rf=rf).paths()
        from oomrl.data.sample import ensure_sample
        from oomrl.portfolio.ledger import Ledger

        folder = out or report_dir(settings.runs_dir, str(account))
        store = ensure_sample(settings)
        ledger = Ledger(settings.ledger)
        ledger.create_schema()  # a fresh OOMRL_HOME has no tables yet: say "no NAV", not a SQL error
        return account_report(ledger, store, str(account), folder, phases=windows,
                              benchmark_kind=benchmark, rf=rf, workspace_dir=settings.workspace_dir,
                              runs_dir=settings.runs_dir).paths()

    for path in run_or_exit(body):
        typer.echo(str(path))


def diagnose_command(
    account: str = typer.Option(..., "--account", help="Ledger account to diagnose."),
    as_of: str = typer.Option(..., "--as-of", help="Session date to evaluate (YYYY-MM-DD)."),
    config: Path | None = typer.Option(None, "--config", help="TOML/YAML/JSON alert thresholds."),
) -> None:
    """Evaluate the loss alert rules and print each new autopsy as JSON (one array)."""
    from oomrl.config import get_settings
    from oomrl.diagnostics.diagnose import diagnose_account

    settings = get_settings()
    autopsies = run_or_exit(lambda: diagnose_account(settings, account, as_of, config))
    typer.echo(json.dumps([a.model_dump(mode="json") for a in autopsies], indent=2))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("metrics")(metrics_command)
    app.command("report")(report_command)
    app.command("diagnose")(diagnose_command)
