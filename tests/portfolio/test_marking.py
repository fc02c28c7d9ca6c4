"""Daily marks: a NAV row per session without trades, the kill switch on each, and rebalances around
them."""

from __future__ import annotations

from datetime import date
from typing import Any

import pandas as pd
import pytest

from oomrl.errors import AccountHaltedError, DataValidationError, LedgerConflictError, OomrlError
from oomrl.market.rules import AShareRules
from oomrl.portfolio.killswitch import AccountStatus
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.marking import (
    active_accounts,
    last_stored_session,
    mark_account,
    marked_through,
)
from oomrl.portfolio.rebalance import RebalanceSetup, rebalance
from tests.portfolio.factories import random_panels
from tests.portfolio.inprocess import InProcessStrategy

SYMBOLS = ["600000.SH", "600036.SH", "000001.SZ", "300750.SZ", "688981.SH", "601318.SH"]


def setup() -> RebalanceSetup:
    return RebalanceSetup(
        InProcessStrategy.bundled("daily_momentum"),
        {"top_k": 3, "lookback": 5},
        "v1",
        AShareRules(),
    )


def mark(
    ledger: Ledger, account: str, day: date, panels: dict[str, pd.DataFrame], kill: float = 0.2
) -> Any:
    return mark_account(ledger, account, day, panels, AShareRules(), kill)


def days_of(panels: dict[str, pd.DataFrame]) -> list[date]:
    return [d.date() for d in panels["close"].index]


def test_marks_value_the_book_at_each_close_without_trading(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    ledger.open_account("acc", 1_000_000)
    rebalance(ledger, "acc", days[40], panels, setup())
    before = ledger.account("acc")
    outcome = mark(ledger, "acc", days[44], panels)
    assert outcome.marked == days[41:45] and not outcome.halted
    nav = ledger.nav_frame("acc").set_index("date")
    state = ledger.account("acc")
    assert state.positions == before.positions and state.cash_fen == before.cash_fen
    assert state.last_date == days[40]  # a mark is not a rebalance
    held = pd.Series(state.positions, dtype=float)
    for day in days[41:45]:
        close = panels["close"].loc[pd.Timestamp(day), held.index]
        assert nav.loc[pd.Timestamp(day), "nav"] == pytest.approx(
            state.cash_fen / 100 + float((close * held).sum())
        )
        assert (
            nav.loc[pd.Timestamp(day), "turnover"] == 0 and nav.loc[pd.Timestamp(day), "costs"] == 0
        )
    assert len(ledger.fills_frame("acc")) == len(ledger.fills_frame("acc", days[40], days[40]))
    again = mark(ledger, "acc", days[44], panels)
    assert again.marked == [] and "already marked through" in again.note
    assert marked_through(ledger, "acc") == days[44]


def test_marks_then_a_rebalance_book_exactly_what_the_rebalance_alone_books(tmp_path: Any) -> None:
    """Marking D41..D45 and then rebalancing on D45 (in that order) equals rebalancing on D45
    alone."""
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    books = {}
    for name in ("marked", "plain"):
        book = Ledger(f"sqlite:///{tmp_path / name}.db")
        book.create_schema()
        book.open_account("acc", 1_000_000)
        rebalance(book, "acc", days[40], panels, setup())
        if name == "marked":
            assert len(mark(book, "acc", days[45], panels).marked) == 5
        outcome = rebalance(book, "acc", days[45], panels, setup())
        assert outcome.committed and len(outcome.fills) > 0
        books[name] = book
    marked, plain = (books[n].nav_frame("acc") for n in ("marked", "plain"))
    pd.testing.assert_frame_equal(marked, plain)
    assert books["marked"].reconcile("acc") == []
    # The rebalance row replaced the provisional mark of D45: one row, with the day's trading in it.
    assert (marked["date"] == pd.Timestamp(days[45])).sum() == 1 and marked["turnover"].iloc[-1] > 0


def test_marking_after_the_days_rebalance_is_a_no_op_and_earlier_rebalances_are_refused(
    ledger: Ledger,
) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    ledger.open_account("acc", 1_000_000)
    rebalance(ledger, "acc", days[40], panels, setup())
    assert mark(ledger, "acc", days[40], panels).marked == []
    mark(ledger, "acc", days[43], panels)
    with pytest.raises(OomrlError, match="marked up to"):
        rebalance(ledger, "acc", days[42], panels, setup())
    assert rebalance(ledger, "acc", days[43], panels, setup()).committed


def test_a_fresh_account_is_marked_at_its_cash(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    ledger.open_account("new", 500_000)
    outcome = mark(ledger, "new", days[30], panels)
    assert outcome.marked == [days[30]] and outcome.nav == 500_000 and outcome.principal_loss == 0
    assert outcome.strategy_version == "builtin"
    # Its first rebalance on a later day books the sessions after the mark, not before it.
    rebalance(ledger, "new", days[33], panels, setup())
    assert [d.date() for d in ledger.nav_frame("new")["date"]] == days[30:34]


def test_the_kill_switch_trips_on_the_marked_session_and_wins_afterwards(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    ledger.open_account("acc", 1_000_000)
    rebalance(
        ledger,
        "acc",
        days[40],
        panels,
        RebalanceSetup(
            InProcessStrategy.bundled("daily_momentum"),
            {"top_k": 6, "gross_exposure": 1.0},
            "v1",
            AShareRules(),
        ),
    )
    for field in ("open", "high", "low", "close"):  # everything held loses 40 % from D42 on
        panels[field].iloc[42:] *= 0.6
    outcome = mark(ledger, "acc", days[44], panels)
    assert outcome.halted and outcome.halted_on == days[42] and outcome.marked == days[41:45]
    state = ledger.account("acc")
    assert state.status is AccountStatus.HALTED and "kill-switch" in (state.halt_reason or "")
    assert [(e["kind"], e["as_of"]) for e in ledger.events("acc")] == [("halted", days[42])]
    assert "acc" not in active_accounts(ledger)
    later = mark(ledger, "acc", days[46], panels)
    assert later.marked == [] and not later.halted and later.note.startswith("halted")
    with pytest.raises(AccountHaltedError):
        rebalance(ledger, "acc", days[46], panels, setup())


def test_bad_days_and_unknown_holdings_are_refused(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    ledger.open_account("acc", 1_000_000)
    with pytest.raises(DataValidationError, match="no market data"):
        mark(ledger, "acc", date(2024, 1, 6), panels)  # a Saturday
    rebalance(
        ledger,
        "acc",
        days[40],
        panels,
        RebalanceSetup(
            InProcessStrategy.bundled("daily_momentum"), {"top_k": 6}, "v1", AShareRules()
        ),
    )
    smaller = {k: v.drop(columns=SYMBOLS[:3]) for k, v in panels.items()}
    with pytest.raises(DataValidationError, match="held symbols"):
        mark(ledger, "acc", days[41], smaller)
    with pytest.raises(OomrlError, match="no account"):
        mark(ledger, "nobody", days[41], panels)


@pytest.mark.slow
def test_a_concurrent_change_makes_marking_plan_again(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = days_of(panels)
    ledger.open_account("acc", 1_000_000)
    rebalance(ledger, "acc", days[40], panels, setup())
    stale = ledger.account("acc").revision
    commit = ledger.commit_marks
    calls: list[int] = []

    def racing(account: str, revision: int, *args: Any) -> None:
        calls.append(revision)
        if len(calls) == 1:  # another writer commits between planning and committing
            ledger.halt("acc", None, "test")
            ledger.resume("acc", by="test")
        commit(account, revision, *args)

    monkeypatch.setattr(ledger, "commit_marks", racing)
    assert mark(ledger, "acc", days[42], panels).marked == days[41:43]
    assert calls[0] == stale and calls[1] > stale
    with pytest.raises(LedgerConflictError):
        commit("acc", stale, ledger.nav_frame("acc").tail(1), 0.0, 0.0)


def test_active_accounts_and_the_last_stored_session(ledger: Ledger, tmp_path: Any) -> None:
    from oomrl.data.store import MarketStore
    from tests.portfolio.factories import flat_bars

    ledger.open_account("b", 1_000)
    ledger.open_account("a", 1_000)
    assert active_accounts(ledger) == ["a", "b"] and ledger.account_names() == ["a", "b"]
    store = MarketStore(tmp_path / "data")
    with pytest.raises(DataValidationError, match="no bars"):
        last_stored_session(store)
    store.write_bars(flat_bars(["600000.SH"], days=5, start="2024-06-03"))
    assert last_stored_session(store) == date(2024, 6, 7)
