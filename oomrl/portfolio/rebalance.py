"""One live rebalance of an account on a session: data to the day before, targets, fills, commit.

It commits once."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Protocol

import numpy as np
import pandas as pd

from oomrl.errors import DataValidationError, OomrlError
from oomrl.market.markets import market_name
from oomrl.portfolio.actions import ACTION_COLUMNS
from oomrl.portfolio.book import concat_columns
from oomrl.portfolio.broker import PaperBroker
from oomrl.portfolio.hosting import StrategyRunner
from oomrl.portfolio.killswitch import KillSwitch, require_active
from oomrl.portfolio.ledger import AccountState, Ledger, RebalanceRecord
from oomrl.portfolio.market import PANEL_FIELDS, MarketFrames
from oomrl.portfolio.replay import (
    NAV_COLUMNS,
    Book,
    Costing,
    Membership,
    decide,
    mark_sessions,
    trade_session,
)
from oomrl.portfolio.setup import RebalanceSetup

__all__ = [
    "HISTORY_DAYS",
    "RebalanceOutcome",
    "RebalanceSetup",
    "advance",
    "load_panels",
    "rebalance",
]

# Calendar days of history loaded before as_of: momentum lookbacks, ADV and volatility windows.
HISTORY_DAYS = 200

logger = logging.getLogger(__name__)


class PanelSource(Protocol):
    """What the rebalance needs from the market store."""

    def read_panel(
        self, field: str, start: Any = None, end: Any = None, symbols: Any = None
    ) -> pd.DataFrame: ...


def load_panels(
    store: PanelSource, as_of: date, history_days: int = HISTORY_DAYS, market: str | None = "cn"
) -> dict[str, pd.DataFrame]:
    """Date x symbol panels up to and including as_of (the execution session) from the store.

    Only the symbols of `market` are kept. A store may hold several markets; a book trades one.
    None keeps every symbol.
    """
    start = pd.Timestamp(as_of) - timedelta(days=history_days)
    panels: dict[str, pd.DataFrame] = {}
    together = getattr(store, "read_panels", None)  # one read of the files for every field
    read = (
        together(PANEL_FIELDS, start=start, end=pd.Timestamp(as_of)) if together is not None else {}
    )
    for field in PANEL_FIELDS:
        try:
            panel = (
                read[field]
                if field in read
                else store.read_panel(field, start=start, end=pd.Timestamp(as_of))
            )
        except (KeyError, ValueError):
            continue  # optional fields (amount, prev_close_raw, factor, ...) may be absent
        if panel is not None and not panel.empty:
            panels[field] = panel
    if "close" not in panels:
        raise DataValidationError(f"the market store has no close prices up to {as_of}")
    if market is not None:
        keep = [s for s in panels["close"].columns if market_name(str(s)) == market]
        if not keep:
            raise DataValidationError(f"the market store has no {market} symbols up to {as_of}")
        panels = {field: panel.reindex(columns=keep) for field, panel in panels.items()}
    return panels


@dataclass
class RebalanceOutcome:
    """What a rebalance did (or, on a dry run, would do)."""

    account: str
    as_of: date
    committed: bool
    duplicate: bool
    halted: bool
    orders: pd.DataFrame
    fills: pd.DataFrame
    nav: pd.DataFrame
    strategy_version: str
    jail: str | None = None  # where the strategy's code ran; None when it was not asked

    def summary(self) -> dict[str, Any]:
        """A one-line account of the step: NAV, turnover, costs, leakage."""
        last = self.nav.iloc[-1].to_dict() if len(self.nav) else {}
        return {
            "account": self.account,
            "as_of": str(self.as_of),
            "committed": self.committed,
            "duplicate": self.duplicate,
            "halted": self.halted,
            "orders": len(self.orders),
            "fills": len(self.fills),
            "nav": last.get("nav"),
            "turnover": last.get("turnover"),
            "costs": last.get("costs"),
            "slippage_leakage": last.get("slippage_leakage"),
            "principal_loss": last.get("principal_loss"),
            "strategy_version": self.strategy_version,
            "jail": self.jail,
        }


def session_index(market: MarketFrames, day: date) -> int:
    """Position of session `day` in the market's dates; DataValidationError when it has no data."""
    try:
        return market.index_of(pd.Timestamp(day))
    except KeyError as exc:
        raise DataValidationError(
            f"no market data on {day}: not a session or not ingested"
        ) from exc


def held_shares(market: MarketFrames, positions: dict[str, int]) -> np.ndarray:
    """Shares per market symbol; DataValidationError when a holding has no market data."""
    unknown = sorted(set(positions) - set(market.symbols))
    if unknown:
        raise DataValidationError(f"held symbols without market data: {unknown[:5]}")
    held = np.zeros(len(market.symbols), dtype=np.int64)
    for symbol, quantity in positions.items():
        held[market.symbols.get_loc(symbol)] = quantity
    return held


def book_at(nav: pd.DataFrame, state: AccountState, held: np.ndarray) -> Book:
    """The book as the last rebalance left it: its cash and shares, and the NAV booked that day."""
    initial = state.initial_cash_fen / 100
    upto = (
        nav[nav["date"] <= pd.Timestamp(state.last_date)]
        if state.last_date is not None
        else nav.iloc[:0]
    )
    return Book(
        held,
        state.cash_fen,
        float(upto["nav"].iloc[-1]) if len(upto) else initial,
        initial,
        state.last_date,
    )


def rebalance(
    ledger: Ledger,
    account: str,
    as_of: date,
    panels: dict[str, pd.DataFrame] | MarketFrames,
    setup: RebalanceSetup,
    dry_run: bool = False,
    runner: StrategyRunner | None = None,
) -> RebalanceOutcome:
    """Rebalance `account` on session `as_of`; commits once, all-or-nothing (unless dry_run).

    `runner` is an open StrategyRunner on the same market; a loop of rebalances keeps one host.
    Without one, the strategy's host is started for this decision and stopped after it.
    """
    as_of = pd.Timestamp(as_of).date()
    state = ledger.account(account)
    empty = pd.DataFrame()
    if ledger.rebalance_id(account, as_of) is not None:
        logger.info(
            "rebalance of %s on %s is already booked: this retry writes nothing", account, as_of
        )
        return RebalanceOutcome(
            account,
            as_of,
            False,
            True,
            False,
            ledger.orders_frame(account, as_of),
            ledger.fills_frame(account, as_of, as_of),
            empty,
            setup.version,
        )
    require_active(account, state.status, state.halt_reason)
    if state.last_date is not None and as_of <= state.last_date:
        raise OomrlError(
            f"account {account!r} is already booked up to {state.last_date}; "
            f"cannot rebalance on {as_of}"
        )
    market = panels if isinstance(panels, MarketFrames) else MarketFrames.build(panels, setup.rules)
    t = session_index(market, as_of)
    if t < 1:
        raise DataValidationError(f"no session before {as_of} in the data: cannot decide")
    held = held_shares(market, state.positions)
    # Daily marks (oomrl.portfolio.marking) may have valued sessions since the last rebalance. A
    # mark on as_of itself is provisional and gives way to this rebalance's row.
    nav_before = ledger.nav_frame(account)
    if len(nav_before) and nav_before["date"].iloc[-1] > pd.Timestamp(as_of):
        raise OomrlError(
            f"account {account!r} is marked up to {nav_before['date'].iloc[-1]:%Y-%m-%d}; "
            f"cannot rebalance on the earlier {as_of}"
        )
    nav_before = nav_before[nav_before["date"] < pd.Timestamp(as_of)]
    membership = Membership.of(setup.membership)
    costing = Costing(
        setup.lam,
        setup.gamma,
        KillSwitch(setup.kill_threshold),
        setup.version,
        membership,
        setup.terminal_penalty,
    )
    # Corporate actions since the last rebalance change the book (cash, shares). They do so even on
    # sessions a daily mark already valued. So walk from the last rebalance and keep the rows after
    # the last NAV row. A fresh account may have marks.
    since = (
        state.last_date
        if state.last_date is not None
        else (nav_before["date"].iloc[-1] if len(nav_before) else None)
    )
    first_quiet = (
        t if since is None else int(market.dates.searchsorted(pd.Timestamp(since), side="right"))
    )
    columns, book, actions = mark_sessions(
        market, first_quiet, t, book_at(nav_before, state, held), costing
    )
    quiet = pd.DataFrame(columns, columns=NAV_COLUMNS)
    if len(nav_before):
        quiet = quiet[quiet["date"] > nav_before["date"].iloc[-1]].reset_index(drop=True)
    loss_before = float(quiet["principal_loss"].max()) if len(quiet) else -np.inf
    orders, fills, rows, new_book, jail = empty, empty, quiet, book, None
    if costing.kill.trips(loss_before):
        halted = True  # the loss tripped between rebalances: no trade today
    else:
        own = runner is None
        decider = setup.strategy.open(setup.params, market) if runner is None else runner
        try:
            weights, jail = decide(decider, market, t, book, membership), decider.jail
        finally:
            if own:
                decider.close()
        execution, row, new_book, traded = trade_session(
            PaperBroker(market, setup.rules), t, weights, book, costing
        )
        actions = concat_columns([actions, traded])
        orders = execution.orders_frame(market.symbols)
        fills = execution.fills_frame(market.symbols)
        rows = (
            pd.concat([quiet, pd.DataFrame([row])], ignore_index=True)[NAV_COLUMNS]
            if len(quiet)
            else pd.DataFrame([row])[NAV_COLUMNS]
        )
        halted = costing.kill.trips(row["principal_loss"])
    reason = costing.kill.reason(float(rows["principal_loss"].max())) if halted else None
    record = RebalanceRecord(
        account,
        as_of,
        setup.strategy.name,
        setup.version,
        state.revision,
        new_book.cash_fen,
        {market.symbols[i]: int(q) for i, q in enumerate(new_book.held) if q},
        orders,
        fills,
        rows,
        setup.lam,
        setup.gamma,
        reason,
        pd.DataFrame(actions, columns=ACTION_COLUMNS),
    )
    committed = False if dry_run else ledger.commit_rebalance(record)
    outcome = RebalanceOutcome(
        account,
        as_of,
        committed,
        not dry_run and not committed,
        halted,
        orders,
        fills,
        rows,
        setup.version,
        jail,
    )
    _log(outcome, reason)
    return outcome


def _log(outcome: RebalanceOutcome, halt_reason: str | None) -> None:
    """One line per rebalance in the run's log: what was traded, at what cost, and any halt."""
    # Neither booked nor a duplicate is a dry run (a commit that lost a race is a duplicate)
    done = (
        "booked"
        if outcome.committed
        else "not booked"
        if outcome.duplicate
        else "planned (dry run)"
    )
    last = outcome.nav.iloc[-1] if len(outcome.nav) else None
    logger.info(
        "rebalance of %s on %s with %s %s: %d orders, %d fills, NAV %s, costs %s%s",
        outcome.account,
        outcome.as_of,
        outcome.strategy_version,
        done,
        len(outcome.orders),
        len(outcome.fills),
        "-" if last is None else f"{last['nav']:,.2f}",
        "-" if last is None else f"{last['costs']:,.2f}",
        f"; halted: {halt_reason}" if outcome.halted else "",
    )


def advance(
    ledger: Ledger,
    account: str,
    start: date,
    end: date,
    panels: dict[str, pd.DataFrame] | MarketFrames,
    setup: RebalanceSetup,
) -> list[RebalanceOutcome]:
    """Run every rebalance the strategy wants in [start, end], one commit each.

    This is the live loop, replayed. It stops at the first halt. Dates already committed are
    skipped, so a re-run continues where the last one stopped. NAV rows after the last rebalance
    are written by the next one. One strategy host serves the whole walk.
    """
    market = panels if isinstance(panels, MarketFrames) else MarketFrames.build(panels, setup.rules)
    outcomes: list[RebalanceOutcome] = []
    lo, hi = pd.Timestamp(start), pd.Timestamp(end)
    chosen = np.flatnonzero((market.dates >= lo) & (market.dates <= hi))
    if not len(chosen):
        return outcomes
    runner = setup.strategy.open(setup.params, market)
    try:
        for t in chosen.tolist():
            day = market.days[t]
            last = ledger.account(account).last_date
            if (last is not None and day <= last) or not runner.due(t, last):
                continue
            outcome = rebalance(ledger, account, day, market, setup, runner=runner)
            outcomes.append(outcome)
            if outcome.halted:
                break
    finally:
        runner.close()
    return outcomes
