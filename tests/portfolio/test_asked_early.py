"""A replay asks each next decision before its book is known: the same results, the channel kept in
step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from oomrl.errors import StrategyHostError
from oomrl.market.rules import AShareRules
from oomrl.portfolio.hosting import HostedRunner, WorkspaceStrategy
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.replay import replay
from tests.portfolio.factories import random_panels

REPO = Path(__file__).resolve().parents[2]
SYMBOLS = [f"{600000 + i:06d}.SH" for i in range(30)]
START, END = "2024-03-01", "2024-08-30"
# weekly_liquidity reads both halves of the book: holdings (its turnover cap) and the NAV (its ADV
# cap).
PARAMS = {
    "lookback": 20,
    "skip": 2,
    "top_k": 5,
    "min_adv": 1e6,
    "max_weekly_turnover": 0.3,
    "max_adv_participation": 0.001,
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def market() -> MarketFrames:
    return MarketFrames.build(random_panels(SYMBOLS, days=200, volume=2e6), AShareRules())


def counted(runner: HostedRunner) -> list[dict[str, Any]]:
    """The books the runner sends after their questions (frames without an answer of their own)."""
    books: list[dict[str, Any]] = []
    send = runner.host.send

    def sending(message: dict[str, Any], answered: bool = True) -> None:
        if not answered:
            books.append(message)
        send(message, answered=answered)

    runner.host.send = sending
    return books


def replayed(
    market: MarketFrames, early: bool, monkeypatch: pytest.MonkeyPatch, **kwargs: Any
) -> Any:
    with monkeypatch.context() as patch:
        if (
            not early
        ):  # the schedule in hand never names the next rebalance: each is asked with its book
            patch.setattr(HostedRunner, "next_due", lambda self, t, last: None)
        source = WorkspaceStrategy(REPO, "weekly_liquidity")
        runner = source.open(PARAMS, market)
        books = counted(runner)
        try:
            result = replay(source, None, market, START, END, runner=runner, **kwargs)
            assert runner.host.request({"op": "ping"})[
                "ok"
            ]  # nothing left unanswered on the channel
        finally:
            runner.close()
    return result, books


def test_questions_asked_before_their_books_decide_exactly_as_questions_asked_with_them(
    market: MarketFrames, monkeypatch: pytest.MonkeyPatch
) -> None:
    early, books = replayed(market, True, monkeypatch)
    late, none = replayed(market, False, monkeypatch)
    rebalances = early.summary()["rebalances"]
    assert (
        rebalances > 10 and len(books) == rebalances - 1 and none == []
    )  # every decision but the first
    assert {book["op"] for book in books} == {"book"} and any(
        len(b["holdings"]["idx"]) for b in books
    )
    pd.testing.assert_frame_equal(early.nav, late.nav)
    pd.testing.assert_frame_equal(early.fills, late.fills)
    pd.testing.assert_frame_equal(early.orders, late.orders)


def test_a_question_out_when_the_kill_switch_trips_is_answered_and_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e6)
    for field in ("open", "high", "low", "close"):
        panels[field].iloc[120:] *= 0.2  # a crash on a Wednesday, between two weekly rebalances
    market = MarketFrames.build(panels, AShareRules())
    halted, books = replayed(market, True, monkeypatch, kill_threshold=0.05)
    assert halted.halted_on == panels["close"].index[120].date()
    # the question for the rebalance after the halt was out; it got an empty book and its answer was
    # read
    assert books[-1] == {"op": "book", "handle": 1, "portfolio_value": 1.0, "holdings": {}}
    late, _ = replayed(market, False, monkeypatch, kill_threshold=0.05)
    pd.testing.assert_frame_equal(halted.nav, late.nav)


def test_nothing_is_asked_while_a_host_waits_for_a_book(market: MarketFrames) -> None:
    runner = WorkspaceStrategy(REPO, "weekly_liquidity").open(PARAMS, market)
    try:
        t = int(market.dates.searchsorted(pd.Timestamp(START)))
        question = runner.question(t, None)
        with pytest.raises(StrategyHostError, match="before the book of session"):
            runner.due(t + 1, market.days[t])  # the host would read this request as the book
        with pytest.raises(StrategyHostError, match="before the book of session"):
            runner.question(t + 1, None)
        import numpy as np

        weights = question.book(np.array([], dtype=np.int64), np.array([]), 1e7)()
        assert weights.sum() > 0
        with pytest.raises(StrategyHostError, match="sent already"):
            question.book(np.array([], dtype=np.int64), np.array([]), 1e7)
        assert runner.due(t + 1, market.days[t]) in (True, False)  # in step again
    finally:
        runner.close()


def test_a_host_handed_something_else_than_the_book_stops_and_says_so(market: MarketFrames) -> None:
    runner = WorkspaceStrategy(REPO, "weekly_liquidity").open(PARAMS, market)
    try:
        t = int(market.dates.searchsorted(pd.Timestamp(START)))
        runner.question(t, None)
        runner.host.send({"op": "ping"}, answered=False)  # a frame that is not this decision's book
        with pytest.raises(Exception, match="expected the book of this decision, got 'ping'"):
            runner.host.receive()
        with pytest.raises(Exception, match="closed its channel|exit code"):
            runner.host.request({"op": "ping"})
    finally:
        runner.close()


def test_a_replay_failing_with_a_question_out_fails_with_its_own_error(
    market: MarketFrames, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    from oomrl.portfolio import replay as engine

    source = WorkspaceStrategy(REPO, "weekly_liquidity")
    runner = source.open(PARAMS, market)
    trades = 0
    real_trade = engine.trade

    def trade(*args: Any) -> Any:
        nonlocal trades
        trades += 1
        if trades == 3:  # the next question is out: the host dies and this side fails
            os.killpg(runner.host.process.pid, signal.SIGKILL)
            runner.host.process.wait()
            raise RuntimeError("the broker failed")
        return real_trade(*args)

    monkeypatch.setattr(engine, "trade", trade)
    try:
        with pytest.raises(
            RuntimeError, match="the broker failed"
        ):  # not the dropped question's error
            replay(source, None, market, START, END, runner=runner)
        assert runner.waiting is not None and runner.waiting.sent
    finally:
        runner.close()


def test_the_next_question_goes_out_before_an_answer_is_checked(
    market: MarketFrames, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's answer in hand, the next question (its rows, its schedule) goes out first; the
    weights are checked while the host decides it."""
    from oomrl.portfolio import hosting

    source = WorkspaceStrategy(REPO, "weekly_liquidity")
    runner = source.open(PARAMS, market)
    out: list[
        int | None
    ] = []  # at each check: the session of a question out whose book is not sent
    check = hosting.weights_array

    def checking(*args: Any) -> Any:
        waiting = runner.waiting
        out.append(None if waiting is None or waiting.sent else waiting.t)
        return check(*args)

    monkeypatch.setattr(hosting, "weights_array", checking)
    try:
        result = replay(source, None, market, START, END, runner=runner)
    finally:
        runner.close()
    rebalances = result.summary()["rebalances"]
    assert len(out) == rebalances > 10 and out[-1] is None  # after the last one no question is out
    assert all(t is not None for t in out[:-1])
