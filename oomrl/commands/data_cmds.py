"""CLI commands for market data: `oomrl ingest` (any source into the OOMRL_HOME store) with a progress bar."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from oomrl.config import get_settings
from oomrl.data.ingest import IngestReport, ingest
from oomrl.data.sources import get_source
from oomrl.data.store import MarketStore
from oomrl.errors import OomrlError

SHOWN_QUARANTINE_ROWS = 10


def print_report(report: IngestReport, console: Console, store: MarketStore) -> None:
    """What was stored: symbols, rows, date range, quarantined rows with reasons, staleness."""
    summary = report.summary()
    stored = report.stored
    console.print(f"[bold]ingest[/bold] source={report.source} universe={report.universe} "
                  f"range={report.start}..{report.end} store={store.root}")
    console.print(f"  symbols: {summary['symbols']} requested, {summary['symbols_without_data']} without data, "
                  f"{summary['failures']} failed")
    console.print(f"  rows: {summary['rows_fetched']} fetched, {summary['rows_written']} new in store; "
                  f"index levels +{summary['index_rows']}, membership rows {summary['membership_rows']}")
    span = (f", {stored['first_date']:%Y-%m-%d}..{stored['last_date']:%Y-%m-%d}"
            if stored.get("last_date") is not None else "")
    console.print(f"  store now: {stored.get('rows', 0)} bars, {stored.get('symbols', 0)} symbols{span}")
    quarantined = len(report.quarantined) + len(report.index_quarantined)
    reasons = ", ".join(f"{rule} {count}" for rule, count in summary["quarantine_reasons"].items())
    console.print(f"  quarantined: {quarantined} rows" + (f" ({reasons})" if reasons else ""))
    if len(report.quarantined):
        table = Table("date", "symbol", "reason", title="quarantined bars (not stored)")
        for row in report.quarantined.head(SHOWN_QUARANTINE_ROWS).itertuples():
            table.add_row(f"{row.date:%Y-%m-%d}" if row.date == row.date else "?", str(row.symbol), str(row.reason))
        console.print(table)
    for symbol, error in list(report.failures.items())[:SHOWN_QUARANTINE_ROWS]:
        console.print(f"  [red]failed[/red] {symbol}: {error}")
    if report.stale:
        console.print(f"[yellow]STALE[/yellow]: {report.stale_reason}")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""

    @app.command("ingest")
    def ingest_command(
        source: str = typer.Option("sample", help="sample | akshare[:qfq|hfq|none] | yfinance | csv:DIR | synthetic[:N]"),
        universe: str = typer.Option("csi300", help="csi300 (point-in-time members), all, or a comma list of codes"),
        start: str | None = typer.Option(None, help="first date (default: what the source holds)"),
        end: str | None = typer.Option(None, help="last date (default: what the source holds / today)"),
    ) -> None:
        """Fetch, validate and store daily bars, CSI 300 levels and membership; bad rows are quarantined."""
        console = Console(soft_wrap=True)
        try:
            settings = get_settings()
            store = MarketStore(settings.data_dir)
            market = get_source(source)
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console, transient=True) as bar:
                task = bar.add_task(f"{market.name}", total=None)

                def advance(done: int, total: int, symbol: str) -> None:
                    bar.update(task, completed=done, total=total, description=f"{market.name} {symbol}")

                report = ingest(market, universe, start, end, store, progress=advance)
        except (OomrlError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        print_report(report, console, store)
