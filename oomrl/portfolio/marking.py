"""Daily mark-to-market: a NAV row per session between rebalances, the kill switch checked on each.

The marks are provisional for the day itself. A rebalance on a marked day replaces that day's row
with its own (trades and costs included). So marking and the weekly rebalance may run in either
order, and the ledger ends the same. A mark never trades and never moves `last_date` (the last
rebalance).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, cast

import pandas as pd

from oomrl.errors import DataValidationError, LedgerConflictError
from oomrl.market.rules import FrictionRules
from oomrl.portfolio.killswitch import AccountStatus, KillSwitch
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.rebalance import HISTORY_DAYS, book_at, held_shares, load_panels, session_index
from oomrl.portfolio.replay import NAV_COLUMNS, Costing, mark_sessions
from oomrl.portfolio.reward import DEFAULT_TERMINAL_PENALTY
from oomrl.portfolio.setup import market_rules
from oomrl.settings import OomrlSettings

# A rebalance committing in between changes the revision: plan the marks again
CONFLICT_ATTEMPTS = 3
BUILTIN = "builtin"


@dataclass
class MarkOutcome:
    """What marking one account did: the sessions newly marked, and whether the kill switch
    tripped."""

    account: str
    as_of: date
    marked: list[date] = field(default_factory=list)
    halted: bool = False  # tripped by these marks (the halt is new)
    halted_on: date | None = None
    nav: float | None = None
    principal_loss: float | None = None
    strategy_version: str = BUILTIN
    note: str = ""

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly line for artifacts and logs."""
        return {
            "account": self.account,
            "as_of": str(self.as_of),
            "sessions_marked": len(self.marked),
            "first": str(self.marked[0]) if self.marked else None,
            "last": str(self.marked[-1]) if self.marked else None,
            "halted": self.halted,
            "halted_on": str(self.halted_on) if self.halted_on else None,
            "nav": self.nav,
            "principal_loss": self.principal_loss,
            "strategy_version": self.strategy_version,
            "note": self.note,
        }


def marked_through(ledger: Ledger, account: str) -> date | None:
    """The last session with a NAV row (a mark or a rebalance), or None."""
    nav = ledger.nav_frame(account)
    return None if nav.empty else pd.Timestamp(nav["date"].iloc[-1]).date()


def holding_version(ledger: Ledger, account: str) -> str:
    """The version whose trades made the book being marked.

    That is the version of the last NAV row, else the active one. A promoted version owns the book
    only once it has traded."""
    nav = ledger.nav_frame(account)
    if not nav.empty:
        return str(nav["strategy_version"].iloc[-1])
    active = ledger.active_strategy(account)
    return active[0] if active else BUILTIN


def active_accounts(ledger: Ledger) -> list[str]:
    """Every account that may trade (not halted), by name."""
    return sorted(
        name
        for name in ledger.account_names()
        if ledger.account(name).status is AccountStatus.ACTIVE
    )


def plan_marks(
    ledger: Ledger,
    account: str,
    as_of: date,
    market: MarketFrames,
    kill: KillSwitch,
    version: str,
    terminal_penalty: float = DEFAULT_TERMINAL_PENALTY,
) -> tuple[pd.DataFrame, int]:
    """NAV rows for the sessions after the last NAV row up to `as_of`, and their revision.

    The walk starts at the last rebalance. Corporate actions since then are booked by the next
    rebalance. They already move the book's cash and shares on the sessions marked before.
    """
    state = ledger.account(account)
    nav = ledger.nav_frame(account)
    t = session_index(market, as_of)
    last = None if nav.empty else pd.Timestamp(nav["date"].iloc[-1])
    first = t if last is None else int(market.dates.searchsorted(last, side="right"))
    if first > t:
        return pd.DataFrame(columns=NAV_COLUMNS), state.revision
    held = held_shares(market, state.positions)
    start = (
        first
        if state.last_date is None
        else min(first, int(market.dates.searchsorted(pd.Timestamp(state.last_date), side="right")))
    )
    costing = Costing(kill=kill, version=version, terminal_penalty=terminal_penalty)
    columns, _, _ = mark_sessions(market, start, t + 1, book_at(nav, state, held), costing)
    rows = pd.DataFrame(columns, columns=NAV_COLUMNS)
    rows = rows[rows["date"] >= market.dates[first]].reset_index(drop=True)
    return rows, state.revision


def mark_account(
    ledger: Ledger,
    account: str,
    as_of: date,
    panels: dict[str, pd.DataFrame] | MarketFrames,
    rules: FrictionRules,
    kill_threshold: float,
    lam: float = 0.0,
    gamma: float = 0.0,
    terminal_penalty: float = DEFAULT_TERMINAL_PENALTY,
) -> MarkOutcome:
    """Mark `account` at the close of every session up to `as_of` it has no NAV for; one commit.

    A halted account is left as it is: its halt already stands. A marked session's principal loss
    may reach the threshold. Then the account halts on that session, in the same transaction.
    """
    as_of = pd.Timestamp(as_of).date()
    version = holding_version(ledger, account)
    outcome = MarkOutcome(account, as_of, strategy_version=version)
    market = panels if isinstance(panels, MarketFrames) else MarketFrames.build(panels, rules)
    kill = KillSwitch(kill_threshold)
    for _ in range(CONFLICT_ATTEMPTS):
        state = ledger.account(account)
        if state.status is AccountStatus.HALTED:
            outcome.note = f"halted ({state.halt_reason}): not marked"
            return outcome
        rows, revision = plan_marks(ledger, account, as_of, market, kill, version, terminal_penalty)
        if rows.empty:
            outcome.note = f"already marked through {marked_through(ledger, account)}"
            return outcome
        tripped = rows.index[rows["principal_loss"].to_numpy(dtype=float) >= kill.threshold]
        halt_on = pd.Timestamp(rows.loc[tripped[0], "date"]).date() if len(tripped) else None
        reason = kill.reason(float(rows.loc[tripped[0], "principal_loss"])) if halt_on else None
        try:
            ledger.commit_marks(account, revision, rows, lam, gamma, halt_on, reason)
        except LedgerConflictError:
            continue
        last = rows.iloc[-1]
        outcome.marked = [pd.Timestamp(d).date() for d in rows["date"]]
        outcome.nav, outcome.principal_loss = float(last["nav"]), float(last["principal_loss"])
        outcome.halted, outcome.halted_on = halt_on is not None, halt_on
        outcome.note = reason or f"marked {len(rows)} session(s)"
        return outcome
    raise LedgerConflictError(
        f"account {account!r} kept changing while its marks were planned; run again"
    )


def run_marking(
    settings: OomrlSettings, account: str, as_of: date, store: Any = None
) -> MarkOutcome:
    """Mark one account on the stored data, loading just the history its unmarked sessions need."""
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    if store is None:
        from oomrl.data.sample import ensure_sample

        store = ensure_sample(settings)
    since = marked_through(ledger, account)
    # History before the first unmarked session too. A suspended holding is valued at its last
    # close.
    days = HISTORY_DAYS + (0 if since is None else max((as_of - since).days, 0))
    panels = load_panels(store, as_of, history_days=days)
    return mark_account(
        ledger,
        account,
        as_of,
        panels,
        market_rules(settings),
        settings.ledger.kill_threshold,
        settings.market.reward_lambda,
        settings.market.reward_gamma,
        settings.market.reward_terminal_penalty,
    )


def last_stored_session(store: Any) -> date:
    """The last session with bars in the market store (the chain's default `as_of`)."""
    last = store.bar_summary()["last_date"]
    if last is None:
        raise DataValidationError("the market store holds no bars: ingest first")
    return cast(date, pd.Timestamp(last).date())
