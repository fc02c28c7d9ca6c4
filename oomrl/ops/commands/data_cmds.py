"""CLI commands for market data: `oomrl ingest` and `oomrl data check|quarantine`.

`oomrl ingest` takes any source into the OOMRL_HOME store, with a progress bar. `oomrl data
check|quarantine` inspect the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from oomrl.ops.commands import Market, finite_seconds, parse_day, progress

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from oomrl.data.ingest import IngestReport
    from oomrl.data.store import MarketStore

SHOWN_QUARANTINE_ROWS = 10
WaitOption = Annotated[
    float | None,
    typer.Option(
        metavar="SECONDS",
        min=0,
        callback=finite_seconds,
        help="How long to wait for another writer of the store (default: 900; 0 refuses at once).",
    ),
]


def _wait(seconds: float | None) -> float:
    from oomrl.data.lock import DEFAULT_WAIT_S

    return DEFAULT_WAIT_S if seconds is None else seconds


def print_report(report: IngestReport, console: Console, store: MarketStore) -> None:
    """What was stored: symbols, rows, date range, quarantined rows with reasons, staleness."""
    from rich.table import Table

    summary = report.summary()
    stored = report.stored
    console.print(
        f"[bold]ingest[/bold] source={report.source} universe={report.universe} "
        f"range={report.start}..{report.end} store={store.root}"
    )
    console.print(
        f"  symbols: {summary['symbols']} requested, {summary['symbols_without_data']} "
        "without data, "
        f"{summary['failures']} failed"
    )
    console.print(
        f"  rows: {summary['rows_fetched']} fetched, {summary['rows_written']} new in store; "
        f"index levels +{summary['index_rows']}, membership rows {summary['membership_rows']}"
    )
    span = (
        f", {stored['first_date']:%Y-%m-%d}..{stored['last_date']:%Y-%m-%d}"
        if stored.get("last_date") is not None
        else ""
    )
    console.print(
        f"  store now: {stored.get('rows', 0)} bars, {stored.get('symbols', 0)} symbols{span}"
    )
    quarantined = len(report.quarantined) + len(report.index_quarantined)
    reasons = ", ".join(f"{rule} {count}" for rule, count in summary["quarantine_reasons"].items())
    console.print(f"  quarantined: {quarantined} rows" + (f" ({reasons})" if reasons else ""))
    if len(report.quarantined):
        table = Table("date", "symbol", "reason", title="quarantined bars (not stored)")
        for row in report.quarantined.head(SHOWN_QUARANTINE_ROWS).itertuples():
            table.add_row(
                f"{row.date:%Y-%m-%d}" if row.date == row.date else "?",
                str(row.symbol),
                str(row.reason),
            )
        console.print(table)
    for symbol, error in list(report.failures.items())[:SHOWN_QUARANTINE_ROWS]:
        console.print(f"  [red]failed[/red] {symbol}: {error}")
    if report.stale:
        console.print(f"[yellow]STALE[/yellow]: {report.stale_reason}")
    if report.recovered:
        console.print(f"[yellow]recovered[/yellow]: {report.recovered}")


def ingest_command(
    source: Annotated[
        str,
        typer.Option(
            metavar="SOURCE",
            help="Where the data comes from: sample, akshare[:qfq|hfq|none], yfinance, csv:DIR "
            "or synthetic[:N].",
        ),
    ] = "sample",
    universe: Annotated[
        str,
        typer.Option(
            metavar="UNIVERSE",
            help="Which symbols: csi300 (point-in-time members), all, or a comma list of codes.",
        ),
    ] = "csi300",
    start: Annotated[
        str | None,
        typer.Option(
            metavar="DATE", help="First date, YYYY-MM-DD (default: what the source holds)."
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            metavar="DATE", help="Last date, YYYY-MM-DD (default: what the source holds, or today)."
        ),
    ] = None,
    wait: WaitOption = None,
    market: Annotated[
        Market,
        typer.Option(
            help="Market of the symbols, benchmark and trading rules: cn (A-shares, CSI 300), "
            "us (^GSPC) "
            "or hk (^HSI)."
        ),
    ] = Market.cn,
) -> None:
    """Fetch, validate and store daily bars.

    CSI 300 levels and membership are stored too; bad rows are quarantined, never stored.
    """
    from oomrl.data.ingest import ingest
    from oomrl.data.sample_clock import clocked_end
    from oomrl.data.sources import get_source
    from oomrl.data.store import MarketStore
    from oomrl.ops.commands.tables import output_console
    from oomrl.settings import get_settings

    first, last = parse_day(start, "--start"), parse_day(end, "--end")
    settings = get_settings()
    store = MarketStore(settings.store.data_dir)
    market_source = get_source(source)
    # OOMRL_SAMPLE_CLOCK: one session
    last = clocked_end(market_source, last, settings.store.sample_clock, store)
    with progress(market_source.name) as advance:
        report = ingest(
            market_source,
            universe,
            first,
            last,
            store,
            wait=_wait(wait),
            progress=lambda done, total, symbol: advance(done, total, symbol),
            on_wait=lambda note: typer.echo(note, err=True),
            market=market.value,
        )
    # A quarantine table's reasons whole on a pipe too
    print_report(report, output_console(), store)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("ingest")(ingest_command)
    app.add_typer(data_app, name="data")


def print_quarantine(rows: pd.DataFrame, limit: int) -> None:
    """Quarantined rows, one line each (date, symbol or index, reason) under a heading per
    ingest."""
    import pandas as pd

    shown = rows.head(limit)
    for ingest_id, group in shown.groupby("ingest", sort=False):
        typer.echo(
            f"ingest {ingest_id}: {int((rows['ingest'] == ingest_id).sum())} quarantined row(s)"
        )
        for row in group.to_dict("records"):
            when = f"{row['date']:%Y-%m-%d}" if pd.notna(row.get("date")) else "?"
            label = (
                row.get("symbol")
                if row["table"] == "bars"
                else f"index {row.get('code')} {row.get('kind')}"
            )
            typer.echo(f"  {when}  {label!s:<20} {row['reason']}")
    if len(rows) > limit:
        typer.echo(
            f"... {len(rows) - limit} more (raise --limit, or --json for every row and column)"
        )


data_app = typer.Typer(help="Inspect the market store under OOMRL_HOME/data.", no_args_is_help=True)


@data_app.command("check")
def check_command(wait: WaitOption = None) -> None:
    """Check the store and clear interrupted writes.

    What an interrupted write left is cleared under the writer lock. Every stored file is read.
    """
    from oomrl.data.store import MarketStore
    from oomrl.errors import OomrlError
    from oomrl.settings import get_settings

    store = MarketStore(get_settings().store.data_dir)
    with store.transaction(_wait(wait), on_wait=lambda note: typer.echo(note, err=True)) as tx:
        note, problems, summary = tx.recovery_note(), tx.verify(), tx.bar_summary()
        generation = tx.catalog().generation
    if note:
        typer.echo(f"recovered: {note}")
    for problem in problems:
        typer.echo(f"damaged: {problem}", err=True)
    if problems:
        raise OomrlError(
            f"{len(problems)} file(s) of {store.root} are damaged: move it away and ingest again"
        )
    span = (
        f", {summary['first_date']:%Y-%m-%d}..{summary['last_date']:%Y-%m-%d}"
        if summary["rows"]
        else ""
    )
    typer.echo(
        f"store {store.root} is sound: generation {generation}, {summary['rows']} bars, "
        f"{summary['symbols']} symbols{span}"
    )


@data_app.command("quarantine")
def quarantine_command(
    ingest_id: Annotated[
        str, typer.Option("--ingest", metavar="ID", help="An ingest id, `last` or `all`.")
    ] = "last",
    limit: Annotated[
        int, typer.Option(min=1, metavar="N", help="Rows shown (not with --json).")
    ] = SHOWN_QUARANTINE_ROWS * 5,
    as_json: Annotated[
        bool, typer.Option("--json", help="Every row as JSON records (all columns).")
    ] = False,
) -> None:
    """Show the rows ingests quarantined, with their reasons.

    Quarantined rows are kept on disk for reading here, never stored as data.
    """
    from oomrl.data.store import MarketStore
    from oomrl.errors import OomrlError
    from oomrl.settings import get_settings

    store = MarketStore(get_settings().store.data_dir)
    known = [entry.get("id") for entry in store.manifest().get("ingests", [])]
    if ingest_id not in ("last", "all") and ingest_id not in known:
        raise OomrlError(
            f"no ingest {ingest_id!r} in {store.root}; known: "
            f"{', '.join(map(str, known[-5:])) or 'none'}"
        )
    rows = store.quarantine(None if ingest_id == "all" else ingest_id)
    if as_json:
        typer.echo(rows.to_json(orient="records", date_format="iso"))
    elif rows.empty:
        typer.echo(f"no quarantined rows kept for ingest {ingest_id} in {store.root}")
    else:
        print_quarantine(rows, limit)
