"""No memory across decisions: recorded decisions recomputed each in a fresh (real, jailed) strategy
host."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomrl.market.rules import AShareRules
from oomrl.portfolio.hosting import WorkspaceStrategy
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.recompute import evenly_spread, recompute_fresh
from oomrl.portfolio.replay import replay
from tests.portfolio.factories import random_panels

SYMBOLS = [f"{600000 + i:06d}.SH" for i in range(30)]
# 15 sessions: fewer than the 30 names the counter walks over
START, END = ("2024-03-01", "2024-03-21")
# Trades the name its call count points at: the n-th decision depends on the n-1 before it.
COUNTING = '''
from strategy_api import StrategyParams

_CALLS = [0]


class Counting:
    name = "counting"
    Params = StrategyParams

    def rebalance_due(self, day, last):
        return True

    def target_weights(self, view, holdings, params):
        _CALLS[0] += 1
        names = view.universe()
        return {names[_CALLS[0] % len(names)]: 0.5}


STRATEGY = Counting()
'''
# Fails unless it made an earlier decision in this process (its first one was on session FIRST).
REMEMBERS = '''
from strategy_api import StrategyParams, equal_weights

_SEEN = []


class Remembers:
    name = "remembers"
    Params = StrategyParams

    def rebalance_due(self, day, last):
        return True

    def target_weights(self, view, holdings, params):
        if not _SEEN and len(view.dates) > FIRST:
            raise RuntimeError("no earlier decision to build on")
        _SEEN.append(view.as_of)
        return equal_weights(view.universe()[:3], 0.9)


STRATEGY = Remembers()
'''


def workspace(root: Path, market: MarketFrames) -> Path:
    (root / "strategies").mkdir(parents=True)
    (root / "strategies" / "__init__.py").write_text("")
    (root / "strategies" / "counting.py").write_text(COUNTING)
    first = int(market.dates.searchsorted(START))
    (root / "strategies" / "remembers.py").write_text(REMEMBERS.replace("FIRST", str(first)))
    return root


def recorded(source: WorkspaceStrategy, market: MarketFrames) -> list:
    """The decisions of a sequential replay of `source`."""
    runner = source.open(None, market, record=True)
    try:
        replay(source, None, market, START, END, runner=runner)
    finally:
        runner.close()
    assert runner.decisions is not None
    return runner.decisions


def test_a_sample_is_evenly_spread_and_is_everything_when_short() -> None:
    assert evenly_spread(4, 10) == [0, 1, 2, 3]
    spread = evenly_spread(250, 10)
    assert (
        len(set(spread)) == 10 and spread[0] == 0 and spread[-1] == 249 and spread == sorted(spread)
    )
    assert evenly_spread(11, 10) == sorted(set(evenly_spread(11, 10)))
    assert evenly_spread(0) == []


@pytest.mark.slow
def test_a_decision_that_counts_earlier_calls_differs_in_a_fresh_host(tmp_path: Path) -> None:
    market = MarketFrames.build(random_panels(SYMBOLS, days=80, volume=2e7), AShareRules())
    source = WorkspaceStrategy(workspace(tmp_path / "ws", market), "counting")
    decisions = recorded(source, market)
    assert len(decisions) == 15 and [d.t for d in decisions] == sorted(d.t for d in decisions)
    fresh = source.open(None, market, schedule_ahead=False)  # as recompute_fresh opens each host
    try:
        middle = decisions[7]
        fresh.weights(middle.t, middle.held, middle.held_weights, middle.nav, middle.members)
        assert fresh.shared is not None and fresh.shared.written == middle.t  # rows up to t-1 only
    finally:
        fresh.close()
    found = recompute_fresh(source, None, market, decisions, count=3)
    assert found.total == 15 and len(found.checked) == 3
    # The first decision is every fresh host's first call too; the later ones are not.
    assert [d.day for d in found.differences] == found.checked[1:]
    for difference in found.differences:
        assert difference.error is None and len(difference.symbols) == 2  # one name out, another in
        assert str(difference.day) in difference.describe()


@pytest.mark.slow
def test_a_strategy_failing_in_a_fresh_host_is_a_difference_not_an_exception(
    tmp_path: Path,
) -> None:
    market = MarketFrames.build(random_panels(SYMBOLS, days=80, volume=2e7), AShareRules())
    source = WorkspaceStrategy(workspace(tmp_path / "ws", market), "remembers")
    # Sequentially, every decision has an earlier one (or is the first)
    decisions = recorded(source, market)
    found = recompute_fresh(source, None, market, decisions, count=2)
    assert [d.day for d in found.differences] == [found.checked[1]]
    error = found.differences[0].error
    assert error is not None and "RuntimeError: no earlier decision to build on" in error
