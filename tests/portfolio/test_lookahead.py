"""No decision sees a row after its date: a look-ahead attack replays exactly like the honest
strategy.

The attack (tests/fixtures/lookahead/strategies/peek.py) adds the mean close of the next five
sessions to its score, read through the base of the view's arrays and the view's private state.
Through the strategy host those rows are not written yet when it decides, so its fills and NAV equal
those of the honest strategy; with every row written before the first decision (what the engine must
never do), the same attack trades differently, so the comparison can fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from oomrl.market.rules import AShareRules
from oomrl.portfolio.hosting import HostedRunner, WorkspaceStrategy
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.replay import ReplayResult, replay
from tests.portfolio.factories import random_panels

WORKSPACE = Path(__file__).resolve().parent.parent / "fixtures" / "lookahead"
SYMBOLS = [f"{600000 + i:06d}.SH" for i in range(12)]


class Leaky(WorkspaceStrategy):
    """The host of `peek`, with the whole market written before the first decision (a broken
    engine)."""

    def open(self, params: Mapping[str, Any] | None, market: MarketFrames) -> HostedRunner:
        runner = super().open(params, market)
        assert runner.shared is not None
        runner.shared.write(len(market.days))
        return runner


def run(source: WorkspaceStrategy, market: MarketFrames) -> ReplayResult:
    return replay(
        source,
        None,
        market,
        market.dates[10],
        market.dates[-1],
        AShareRules(),
        10_000_000.0,
        kill_threshold=1.0,
    )


@pytest.fixture(scope="module")
def market() -> MarketFrames:
    return MarketFrames.build(random_panels(SYMBOLS, days=80, seed=7), AShareRules())


@pytest.mark.slow
def test_a_look_ahead_strategy_decides_as_if_fed_only_the_past(market: MarketFrames) -> None:
    peek = run(WorkspaceStrategy(WORKSPACE, "peek"), market)
    honest = run(WorkspaceStrategy(WORKSPACE, "honest"), market)
    assert len(peek.fills) > 100  # it traded every session
    pd.testing.assert_frame_equal(peek.fills, honest.fills)
    pd.testing.assert_series_equal(peek.nav["nav"], honest.nav["nav"])


@pytest.mark.slow
def test_the_same_attack_profits_when_later_rows_exist_so_the_comparison_can_fail(
    market: MarketFrames,
) -> None:
    leaky = run(Leaky(WORKSPACE, "peek"), market)
    honest = run(WorkspaceStrategy(WORKSPACE, "honest"), market)
    assert not leaky.fills[["date", "symbol"]].equals(honest.fills[["date", "symbol"]])
    assert leaky.nav["nav"].iloc[-1] > honest.nav["nav"].iloc[-1]  # the future pays
