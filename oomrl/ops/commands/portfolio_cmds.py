"""CLI commands for the portfolio: `oomrl rebalance`, `oomrl replay`, `oomrl account
show|resume`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from oomrl.ops.commands import (
    AccountOption,
    Market,
    account_or_default,
    parse_day,
    progress,
    valid_strategy,
)

SHOWN_ROWS = 20

account_app = typer.Typer(help="Show an account, or resume it after a halt.", no_args_is_help=True)

if TYPE_CHECKING:
    from oomrl.portfolio.rebalance import RebalanceOutcome


def print_shown(console: Any, rows: list[dict[str, str]], columns: Any, title: str) -> None:
    """The first SHOWN_ROWS formatted rows (units in the titles), never cut.

    They are wrapped into parts on a narrow terminal, and whole on a pipe.
    """
    from oomrl.artifacts import numeric_titles
    from oomrl.ops.commands.tables import print_rows

    print_rows(console, rows[:SHOWN_ROWS], f"{title} ({len(rows)} rows)", numeric_titles(columns))


def rebalance_line(outcome: RebalanceOutcome) -> str:
    """The rebalance's outcome in words, with units (the --json output keeps the fractions)."""
    from oomrl.artifacts import NAV_COLUMNS, formatted_rows

    (nav,) = formatted_rows([outcome.summary()], NAV_COLUMNS)
    shown = ", ".join(
        f"{title} {value}" for title, value in nav.items() if title != "date" and value != "—"
    )
    return (
        f"{outcome.account} on {outcome.as_of}: {len(outcome.orders)} order(s), "
        f"{len(outcome.fills)} "
        f"fill(s){'; ' + shown if shown else ''}; version {outcome.strategy_version[:12]}"
    )


def warn_unjailed(jails: list[str | None]) -> None:
    """One line on stderr when strategy code ran outside a jail (OOMRL_UNSAFE_NO_JAIL=1)."""
    from oomrl.portfolio.hosting import UNSAFE_JAIL

    if UNSAFE_JAIL in jails:
        typer.echo(f"warning: strategy code ran unjailed: jail {UNSAFE_JAIL}", err=True)


def rebalance_command(
    account: AccountOption = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="DATE",
            help="Session to rebalance on, YYYY-MM-DD (default: the latest).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the orders; write nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the summary, as JSON (fractions).")
    ] = False,
) -> None:
    """Rebalance an account on one session.

    The account trades its active strategy version; a session is committed at most once.
    """
    from oomrl.artifacts import FILL_COLUMNS, ORDER_COLUMNS, fills_rows, orders_rows
    from oomrl.ops.commands.tables import output_console
    from oomrl.portfolio.service import last_session
    from oomrl.repair.trading import run_rebalance
    from oomrl.settings import get_settings

    settings = get_settings()
    day = parse_day(as_of, "--as-of") or last_session()
    outcome = run_rebalance(settings, account_or_default(account, settings), day, dry_run=dry_run)
    warn_unjailed([outcome.jail])
    if as_json:
        typer.echo(json.dumps(outcome.summary(), default=str))
        return
    console = output_console()
    if dry_run:
        console.print("[yellow]dry run[/yellow]: nothing was written")
    elif outcome.duplicate:
        console.print(
            f"rebalance of {outcome.account} on {day} was already committed; "
            "nothing new was written"
        )
    if len(outcome.orders):
        print_shown(
            console, orders_rows(outcome.orders.to_dict("records")), ORDER_COLUMNS, "orders"
        )
    if len(outcome.fills):
        print_shown(console, fills_rows(outcome.fills.to_dict("records")), FILL_COLUMNS, "fills")
    console.print(rebalance_line(outcome))
    if outcome.halted:
        console.print(
            "[red]HALTED[/red]: the kill switch tripped; `oomrl account resume "
            f"--account {outcome.account} --confirm` to trade again"
        )


def replay_command(
    strategy: Annotated[
        list[str],
        typer.Option(
            metavar="NAME",
            callback=lambda names: [valid_strategy(n) for n in names],
            help="Strategy to replay; repeat the option to compare several.",
        ),
    ],
    start: Annotated[str, typer.Option(metavar="DATE", help="First session, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option(metavar="DATE", help="Last session, YYYY-MM-DD.")],
    params: Annotated[
        str | None, typer.Option(metavar="JSON", help="Strategy parameters as a JSON object.")
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Load strategies/ from this folder instead of the bundled ones."
        ),
    ] = None,
    kill_threshold: Annotated[
        float | None,
        typer.Option(
            metavar="FRACTION",
            min=0.0,
            max=1.0,
            help="Principal loss that halts the replay (default: OOMRL_KILL_THRESHOLD; 1 = never).",
        ),
    ] = None,
    market: Annotated[
        Market, typer.Option(help="Which stored symbols to trade, under that market's rules.")
    ] = Market.cn,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summaries as JSON.")] = False,
) -> None:
    """Paper-trade strategies over stored data.

    Prints turnover, costs, slippage leakage and net return per strategy.
    """
    from oomrl.errors import OomrlError
    from oomrl.portfolio.service import run_replay
    from oomrl.settings import get_settings

    settings = get_settings()
    first, last = parse_day(start, "--start"), parse_day(end, "--end")
    if first > last:  # said before any data is loaded (which would describe a range of its own)
        raise OomrlError(f"--start {first} is after --end {last}")
    summaries = []
    with progress("replay", total=len(strategy)) as advance:
        for done, name in enumerate(strategy):
            advance(done, len(strategy), name)
            summaries.append(
                run_replay(
                    settings,
                    name,
                    first,
                    last,
                    params,
                    workspace,
                    kill_threshold=kill_threshold,
                    market=market.value,
                ).summary()
            )
    warn_unjailed([s.get("jail") for s in summaries])
    if as_json:
        typer.echo(json.dumps(summaries, default=str, indent=2))
        return
    from oomrl.artifacts import REPLAY_COLUMNS, replay_rows
    from oomrl.ops.commands.tables import output_console

    print_shown(output_console(), replay_rows(summaries), REPLAY_COLUMNS, "replay")


@account_app.command("show")
def account_show(
    account: AccountOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the account as one JSON object (dates ISO, fractions as fractions).",
        ),
    ] = False,
) -> None:
    """Show an account.

    Status, cash, positions, the last NAV rows and the active strategy version.
    """
    from oomrl.artifacts import NAV_COLUMNS, nav_rows
    from oomrl.errors import OomrlError
    from oomrl.ops.commands.tables import output_console, rows_table
    from oomrl.portfolio.service import existing_ledger
    from oomrl.repair.versions import StrategyVersions
    from oomrl.settings import get_settings

    settings = get_settings()
    name = account_or_default(account, settings)
    ledger = existing_ledger(settings)  # a read: never creates the ledger
    if ledger is None:
        raise OomrlError(
            f"no account {name!r}: nothing was ever booked with OOMRL_HOME={settings.store.home} "
            "(the ledger does not exist yet)"
        )
    state = ledger.account(name)
    active = ledger.active_strategy(name)
    labels = StrategyVersions(settings.store.workspace_dir).labels(ledger.version_names(name))
    version = (
        f"{labels.get(active[0], active[1])} ({active[0][:12]})"
        if active
        else "none yet (starts on v1)"
    )
    nav = ledger.nav_frame(name).tail(10).drop(columns=["strategy_version"])
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "account": name,
                    "status": state.status.value,
                    "cash": state.cash_fen / 100,
                    "booked_to": state.last_date,
                    "version": version,
                    "halt_reason": state.halt_reason,
                    "positions": dict(sorted(state.positions.items())),
                    "nav": json.loads(nav.to_json(orient="records", date_format="iso")),
                },
                default=str,
            )
        )
        return
    console = output_console()
    console.print(
        f"[bold]{name}[/bold] status={state.status.value.upper()} "
        f"cash={state.cash_fen / 100:,.2f} CNY booked-to={state.last_date} version={version}"
    )
    if state.halt_reason:
        console.print(f"[red]halted:[/red] {state.halt_reason}")
    if state.positions:
        positions = [
            {"symbol": symbol, "shares": f"{quantity:,}"}
            for symbol, quantity in sorted(state.positions.items())
        ]
        console.print(rows_table(positions, f"positions ({len(positions)})", {"shares"}))
    if len(nav):
        print_shown(console, nav_rows(nav), NAV_COLUMNS, "NAV, last sessions")


@account_app.command("resume")
def account_resume(
    account: AccountOption = None,
    confirm: Annotated[
        bool, typer.Option("--confirm", help="A person confirms the resume.")
    ] = False,
) -> None:
    """Lift the kill switch's halt.

    Needs --confirm: a person decides, and the ledger records who.
    """
    import getpass

    from oomrl.errors import OomrlError
    from oomrl.portfolio.service import open_ledger
    from oomrl.settings import get_settings

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
