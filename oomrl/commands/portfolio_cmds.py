"""CLI commands for the portfolio: `oomrl rebalance`, `oomrl replay`, `oomrl account show|resume`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from oomrl.commands import (
    AccountOption,
    Market,
    account_or_default,
    parse_day,
    progress,
    valid_strategy,
)

if TYPE_CHECKING:
    import pandas as pd
    from rich.table import Table

SHOWN_ROWS = 20

account_app = typer.Typer(help="Show an account, or resume it after a halt.",
                          no_args_is_help=True)


def frame_table(frame: pd.DataFrame, title: str, rows: int = SHOWN_ROWS) -> Table:
    """A rich table of the first rows of a frame (floats rounded)."""
    from rich.table import Table

    table = Table(*[str(c) for c in frame.columns], title=f"{title} ({len(frame)} rows)")
    for row in frame.head(rows).itertuples(index=False):
        table.add_row(*[f"{v:,.4f}" if isinstance(v, float) else str(v) for v in row])
    return table


def summary_table(summaries: list[dict[str, Any]]) -> Table:
    """Turnover, total costs, slippage leakage and net return per replay."""
    from rich.table import Table

    table = Table("strategy", "period", "rebalances", "turnover (sum |dw|)", "turnover / yr",
                  "total costs (CNY)", "costs / W0", "slippage leakage", "frictionless",
                  "net return", "dividends", "raw prices known", "halted on", title="replay")
    for s in summaries:
        table.add_row(s["strategy"], f"{s['start']}..{s['end']}", str(s["rebalances"]),
                      f"{s['turnover']:.2f}", f"{s['turnover_annualized']:.1f}",
                      f"{s['total_costs']:,.0f}", f"{s['costs_fraction']:.2%}",
                      f"{s['slippage_leakage']:.2%}", f"{s['frictionless_return']:.2%}",
                      f"{s['net_return']:.2%}", f"{s.get('dividends', 0.0):,.0f}",
                      # fills priced from a known adjustment factor (the rest: the nearest known factor)
                      f"{s.get('raw_prices_known', 1.0):.0%}", str(s["halted_on"] or "-"))
    return table


def warn_unjailed(jails: list[str | None]) -> None:
    """One line on stderr when strategy code ran outside a jail (OOMRL_UNSAFE_NO_JAIL=1)."""
    from oomrl.portfolio.hosting import UNSAFE_JAIL

    if UNSAFE_JAIL in jails:
        typer.echo(f"warning: strategy code ran unjailed: jail {UNSAFE_JAIL}", err=True)


def rebalance_command(
    account: AccountOption = None,
    as_of: Annotated[str | None, typer.Option(
        "--as-of", metavar="DATE", help="Session to rebalance on, YYYY-MM-DD (default: the latest).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the orders; write nothing.")] = False,
) -> None:
    """Rebalance an account on one session.

    The account trades its active strategy version; a session is committed at most once.
    """
    from rich.console import Console

    from oomrl.config import get_settings
    from oomrl.portfolio.service import last_session, run_rebalance

    settings = get_settings()
    day = parse_day(as_of, "--as-of") or last_session()
    outcome = run_rebalance(settings, account_or_default(account, settings), day, dry_run=dry_run)
    warn_unjailed([outcome.jail])
    console = Console()
    if dry_run:
        console.print("[yellow]dry run[/yellow]: nothing was written")
    elif outcome.duplicate:
        console.print(f"rebalance of {outcome.account} on {day} was already committed; "
                      "nothing new was written")
    if len(outcome.orders):
        console.print(frame_table(outcome.orders, "orders"))
    if len(outcome.fills):
        console.print(frame_table(outcome.fills.drop(columns=["cash_delta_fen"], errors="ignore"), "fills"))
    console.print(json.dumps(outcome.summary(), default=str))
    if outcome.halted:
        console.print("[red]HALTED[/red]: the kill switch tripped; `oomrl account resume "
                      f"--account {outcome.account} --confirm` to trade again")


def replay_command(
    strategy: Annotated[list[str], typer.Option(
        metavar="NAME", callback=lambda names: [valid_strategy(n) for n in names],
        help="Strategy to replay; repeat the option to compare several.")],
    start: Annotated[str, typer.Option(metavar="DATE", help="First session, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option(metavar="DATE", help="Last session, YYYY-MM-DD.")],
    params: Annotated[str | None, typer.Option(
        metavar="JSON", help="Strategy parameters as a JSON object.")] = None,
    workspace: Annotated[Path | None, typer.Option(
        metavar="DIR", help="Load strategies/ from this folder instead of the bundled ones.")] = None,
    kill_threshold: Annotated[float | None, typer.Option(
        metavar="FRACTION", min=0.0, max=1.0,
        help="Principal loss that halts the replay (default: OOMRL_KILL_THRESHOLD; 1 = never).")] = None,
    market: Annotated[Market, typer.Option(
        help="Which stored symbols to trade, under that market's rules.")] = Market.cn,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summaries as JSON.")] = False,
) -> None:
    """Paper-trade strategies over stored data.

    Prints turnover, costs, slippage leakage and net return per strategy.
    """
    from oomrl.config import get_settings
    from oomrl.portfolio.service import run_replay

    settings = get_settings()
    first, last = parse_day(start, "--start"), parse_day(end, "--end")
    summaries = []
    with progress("replay", total=len(strategy)) as advance:
        for done, name in enumerate(strategy):
            advance(done, len(strategy), name)
            summaries.append(run_replay(settings, name, first, last, params, workspace,
                                        kill_threshold=kill_threshold, market=market.value).summary())
    warn_unjailed([s.get("jail") for s in summaries])
    if as_json:
        typer.echo(json.dumps(summaries, default=str, indent=2))
        return
    from rich.console import Console

    Console(width=170).print(summary_table(summaries))  # the table is wide; never squeeze it into 80 columns


@account_app.command("show")
def account_show(account: AccountOption = None) -> None:
    """Show an account.

    Status, cash, positions, the last NAV rows and the active strategy version.
    """
    import pandas as pd
    from rich.console import Console

    from oomrl.config import get_settings
    from oomrl.errors import OomrlError
    from oomrl.portfolio.service import existing_ledger

    settings = get_settings()
    name = account_or_default(account, settings)
    ledger = existing_ledger(settings)  # a read: never creates the ledger
    if ledger is None:
        raise OomrlError(f"no account {name!r}: nothing was ever booked with OOMRL_HOME={settings.home} "
                         "(the ledger does not exist yet)")
    state = ledger.account(name)
    active = ledger.active_strategy(name)
    from oomrl.versions import StrategyVersions

    labels = StrategyVersions(settings.workspace_dir).labels(ledger.version_names(name))
    version = (f"{labels.get(active[0], active[1])} ({active[0][:12]})" if active else "none yet (starts on v1)")
    console = Console()
    console.print(f"[bold]{name}[/bold] status={state.status.value.upper()} "
                  f"cash={state.cash_fen / 100:,.2f} booked-to={state.last_date} version={version}")
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
    account: AccountOption = None,
    confirm: Annotated[bool, typer.Option("--confirm", help="A person confirms the resume.")] = False,
) -> None:
    """Lift the kill switch's halt.

    Needs --confirm: a person decides, and the ledger records who.
    """
    import getpass

    from oomrl.config import get_settings
    from oomrl.errors import OomrlError
    from oomrl.portfolio.service import open_ledger

    if not confirm:
        raise OomrlError("resuming a halted account needs --confirm (a person decides)")
    settings = get_settings()
    name = account_or_default(account, settings)
    open_ledger(settings).resume(name, by=getpass.getuser())
    typer.echo(f"{name} resumed: trading allowed again")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("rebalance")(rebalance_command)
    app.command("replay")(replay_command)
    app.add_typer(account_app, name="account")
