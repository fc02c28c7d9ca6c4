"""The daily chain's probation steps as functions, and the champion's trades: what the probation
tests drive forward (the fixture `on_probation` in tests/agent/conftest.py opens the probation)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pandas as pd

from oomrl.market import calendar
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.probation import advance_shadows, decide_due

OPENED = date(2025, 11, 28)  # the last session the repair saw
SESSIONS = 5
DAILY = "return last_rebalance is None or day > last_rebalance"
WEEKLY = (
    "return last_rebalance is None or day.isocalendar()[:2] != last_rebalance.isocalendar()[:2]"
)


def champion_trades(settings: Any, ledger: Ledger, start: date, end: date) -> None:
    """The champion (v1, daily_momentum) trades its account through `end`, as its deployments
    would."""
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.rebalance import advance, load_panels
    from oomrl.portfolio.service import membership
    from oomrl.portfolio.setup import rebalance_setup
    from oomrl.repair.trading import resolve_strategy

    store = ensure_sample(settings)
    resolved = resolve_strategy(settings, ledger, "paper")
    setup = rebalance_setup(resolved.strategy, resolved.version, settings, membership(store))
    advance(ledger, "paper", start, end, load_panels(store, end, history_days=200), setup)


def chain_day(settings: Any, day: date) -> tuple[list[Any], list[Any]]:
    """What the daily chain does for probations on one session: shadows trade, every book is marked,
    ripe ones decided."""
    from oomrl.repair.chain import mark_active_accounts

    advance_shadows(settings, day)
    marking = mark_active_accounts(settings, day)
    assert not marking.errors, marking.errors
    return decide_due(settings, day)


def forward(n: int) -> list[date]:
    return [
        d.date()
        for d in calendar.sessions(pd.Timestamp(OPENED) + pd.Timedelta(days=1), "2026-02-27")[:n]
    ]
