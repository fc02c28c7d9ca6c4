"""CLI commands for the portfolio: `oomrl rebalance`, `oomrl replay`, `oomrl account show|resume`."""

from __future__ import annotations

import getpass
import json
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from oomrl.config import get_settings
from oomrl.errors import OomrlError

SHOWN_ROWS = 20


def _day(text: str | None, what: str) -> date | None:
    if text is None:
        return None
    try:
        return pd.Timestamp(text).date()
    except ValueError as exc:
        raise OomrlError(f"{what} {text!r} is not a date (YYYY-MM-DD)") from exc


def _fail(console: Console, exc: Exception) -> typer.Exit:
    console.print(f"[red]error:[/red] {exc}")
    return typer.Exit(1)


def frame_table(frame: pd.DataFrame, title: str, rows: int = SHOWN_ROWS) -> Table:
    """A rich table of the first rows of a frame (floats rounded)."""
    table = Table(*[str(c) for c in frame.columns], title=f"{title} ({len(frame)} rows)")
    for row in frame.head(rows).itertuples(index=False):
        table.add_row(*[f"{v:,.4f}" if isinstance(v, float) else str(v) for v in row])
    return table


def summary_table(summaries: list[dict[str, Any]]) -> Table:
    """Turnover, total costs, slippage leakage and net return per replay."""
    table = Table("strategy", "period", "rebalances", "turnover (sum |dw|)", "turnover / yr",
                  "total costs (CNY)", "costs / W0", "slippage leakage", "frictionless",
                  "net return", "halted on", title="replay")
    for s in summaries:
        table.add_row(s["strategy"], f"{s['start']}..{s['end']}", str(s["rebalances"]),
                      f"{s['turnover']:.2f}", f"{s['turnover_annualized']:.1f}",
                      f"{s['total_costs']:,.0f}", f"{s['costs_fraction']:.2%}",
                      f"{s['slippage_leakage']:.2%}", f"{s['frictionless_return']:.2%}",
                      f"{s['net_return']:.2%}", str(s["halted_on"] or "-"))
    return table


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""

    @app.command("rebalance")
    def rebalance_command(
        account: str | None = typer.Option(None, help="account (default: OOMRL_ACCOUNT)"),
        as_of: str | None = typer.Option(None, "--as-of", help="session date (default: latest)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the orders, write nothing"),
    ) -> None:
        """Rebalance an account on one session with its active strategy version (commits once)."""
        from oomrl.portfolio.service import last_session, run_rebalance

        console = Console()
        try:
            settings = get_settings()
            day = _day(as_of, "--as-of") or last_session()
            outcome = run_rebalance(settings, account or settings.account, day, dry_run=dry_run)
        except OomrlError as exc:
            raise _fail(console, exc) from exc
        if dry_run:
            console.print("[yellow]dry run[/yellow]: nothing was written")
        elif outcome.duplicate:
            console.print(f"rebalance of {outcome.account} on {day} was already committed; "
                          "nothing new was written")
        if len(outcome.orders):
            console.print(frame_table(outcome.orders, "orders"))
        if len(outcome.fills):
            console.print(frame_table(outcome.fills.drop(columns=["cash_delta_fen"], errors="ignore"),
                                      "fills"))
        console.print(json.dumps(outcome.summary(), default=str))
        if outcome.halted:
            console.print("[red]HALTED[/red]: the kill switch tripped; `oomrl account resume "
                          f"--account {outcome.account} --confirm` to trade again")

    @app.command("replay")
    def replay_command(
        strategy: list[str] = typer.Option(..., help="strategy name (repeat to compare)"),
        start: str = typer.Option(..., help="first session"),
        end: str = typer.Option(..., help="last session"),
        params: str | None = typer.Option(None, help="strategy params as a JSON object"),
        workspace: Path | None = typer.Option(None, help="load strategies/ from this directory"),
        kill_threshold: float | None = typer.Option(None, help="override the kill switch (1 = off)"),
        as_json: bool = typer.Option(False, "--json", help="print the summaries as JSON"),
    ) -> None:
        """Paper-trade strategies over stored data and print turnover, costs, leakage and net return."""
        from oomrl.portfolio.service import run_replay

        console = Console(width=170)  # the table is wide; never squeeze it into 80 columns
        try:
            settings = get_settings()
            first, last = _day(start, "--start"), _day(end, "--end")
            summaries = [run_replay(settings, name, first, last, params, workspace,
                                    kill_threshold=kill_threshold).summary() for name in strategy]
        except OomrlError as exc:
            raise _fail(console, exc) from exc
        if as_json:
            typer.echo(json.dumps(summaries, default=str, indent=2))
        else:
            console.print(summary_table(summaries))

    account_app = typer.Typer(help="Show an account, or resume it after the kill switch halted it.",
                              no_args_is_help=True)
    app.add_typer(account_app, name="account")

    @account_app.command("show")
    def account_show(account: str | None = typer.Option(None, help="account")) -> None:
        """Status, cash, positions, last NAV rows and the active strategy version."""
        from oomrl.portfolio.service import open_ledger

        console = Console()
        try:
            settings = get_settings()
            name = account or settings.account
            ledger = open_ledger(settings)
            state = ledger.account(name)
        except OomrlError as exc:
            raise _fail(console, exc) from exc
        active = ledger.active_strategy(name)
        console.print(f"[bold]{name}[/bold] status={state.status.value.upper()} "
                      f"cash={state.cash_fen / 100:,.2f} booked-to={state.last_date} "
                      f"version={active[1] + '@' + active[0][:12] if active else 'builtin'}")
        if state.halt_reason:
            console.print(f"[red]halted:[/red] {state.halt_reason}")
        if state.positions:
            console.print(frame_table(pd.DataFrame(sorted(state.positions.items()),
                                                   columns=["symbol", "quantity"]), "positions"))
        nav = ledger.nav_frame(name)
        if len(nav):
            console.print(frame_table(nav.tail(10).drop(columns=["strategy_version"]), "nav (last 10)"))

    @account_app.command("resume")
    def account_resume(
        account: str | None = typer.Option(None, help="account"),
        confirm: bool = typer.Option(False, "--confirm", help="a person confirms the resume"),
    ) -> None:
        """Lift the kill switch's halt (needs --confirm; recorded in the ledger with who did it)."""
        from oomrl.portfolio.service import open_ledger

        console = Console()
        try:
            if not confirm:
                raise OomrlError("resuming a halted account needs --confirm (a person decides)")
            settings = get_settings()
            name = account or settings.account
            open_ledger(settings).resume(name, by=getpass.getuser())
        except OomrlError as exc:
            raise _fail(console, exc) from exc
        console.print(f"{name} resumed: trading allowed again")
