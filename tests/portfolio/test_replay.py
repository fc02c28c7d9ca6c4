"""The replay engine: same broker semantics, no look-ahead, kill switch, and the friction story."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from oomrl.errors import OomrlError
from oomrl.market.rules import AShareRules
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.replay import NAV_COLUMNS, replay
from strategies import registry
from tests.portfolio.factories import random_panels
from tests.portfolio.inprocess import InProcessStrategy

SYMBOLS = [f"{600000 + i:06d}.SH" for i in range(30)]


def run(name: str, panels: dict[str, pd.DataFrame], **kwargs: object):
    return replay(
        InProcessStrategy.bundled(name),
        kwargs.pop("params", None),
        panels,
        "2024-03-01",
        "2024-09-30",
        **kwargs,
    )


def test_nav_and_fills_are_consistent() -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e7)
    result = run("daily_momentum", panels, params={"top_k": 5})
    nav = result.nav
    assert list(nav.columns) == NAV_COLUMNS
    assert nav["date"].is_monotonic_increasing and nav["date"].iloc[0] == pd.Timestamp("2024-03-01")
    fills = result.fills
    fees = fills[["commission", "stamp_duty", "transfer_fee", "impact_cost"]].to_numpy().sum()
    assert nav["costs"].sum() == pytest.approx(fees)
    assert nav["cash"].iloc[-1] == pytest.approx(1e7 + fills["cash_delta_fen"].sum() / 100)
    assert (nav["nav"] - nav["cash"] - nav["market_value"]).abs().max() < 1e-6
    compounded = (1 + nav["realized_return"]).prod() * 1e7
    assert compounded == pytest.approx(nav["nav"].iloc[-1])
    summary = result.summary()
    assert summary["net_return"] == pytest.approx(nav["nav"].iloc[-1] / 1e7 - 1)
    assert summary["total_costs"] > 0 and summary["rebalances"] == len(nav)
    assert set(result.orders["reason"]) <= {
        "none",
        "lot",
        "limit_up",
        "limit_down",
        "adv_cap",
        "suspended",
        "cash",
        "no_adv",
        "t_plus_one",
    }


def test_future_data_cannot_change_past_decisions() -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e7)
    base = run("daily_momentum", panels, params={"top_k": 5})
    cut = pd.Timestamp("2024-06-03")
    shocked = {k: v.copy() for k, v in panels.items()}
    for field in ("open", "high", "low", "close"):
        shocked[field].loc[shocked[field].index >= cut] *= np.linspace(0.5, 1.5, len(SYMBOLS))
    other = run("daily_momentum", shocked, params={"top_k": 5})
    before = base.fills[base.fills["date"] < cut]
    pd.testing.assert_frame_equal(before, other.fills[other.fills["date"] < cut])
    assert not base.fills[base.fills["date"] >= cut].equals(other.fills[other.fills["date"] >= cut])


def test_daily_momentum_pays_more_friction_than_weekly_liquidity() -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e7)
    daily = run("daily_momentum", panels, params={"top_k": 5}).summary()
    weekly = run(
        "weekly_liquidity", panels, params={"lookback": 20, "skip": 2, "top_k": 5, "min_adv": 1e7}
    ).summary()
    assert daily["turnover"] > 5 * weekly["turnover"]
    assert daily["total_costs"] > 3 * weekly["total_costs"]
    assert daily["slippage_leakage"] > weekly["slippage_leakage"]
    assert weekly["rebalances"] <= 32  # about one a week over seven months


def test_kill_switch_ends_the_replay_on_the_tripping_session() -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e7)
    result = run("daily_momentum", panels, params={"top_k": 5}, kill_threshold=0.02)
    assert result.halted_on is not None
    assert result.nav["principal_loss"].iloc[-1] >= 0.02
    assert (result.nav["principal_loss"].iloc[:-1] < 0.02).all()
    assert result.summary()["halted_on"] == result.halted_on


def test_kill_switch_also_trips_between_weekly_rebalances() -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e7)
    for field in ("open", "high", "low", "close"):
        panels[field].iloc[120:] *= 0.5
    result = run(
        "weekly_liquidity",
        panels,
        params={"lookback": 20, "skip": 2, "top_k": 5, "min_adv": 1e7, "max_weekly_turnover": 2.0},
        kill_threshold=0.2,
    )
    assert result.halted_on == panels["close"].index[120].date()
    assert result.nav["turnover"].iloc[-1] == 0


def test_a_prepared_market_and_an_open_runner_are_used_as_given() -> None:
    panels = random_panels(SYMBOLS, days=200, volume=2e7)
    market = MarketFrames.build(panels, AShareRules())
    source = InProcessStrategy.bundled("daily_momentum")
    runner = source.open({"top_k": 2}, market)
    first = replay(source, None, market, "2024-03-01", "2024-03-08", runner=runner)
    assert len(first.nav) == 6 and runner.history.rows == market.dates.get_loc(
        pd.Timestamp("2024-03-08")
    )
    assert first.jail == runner.jail  # outputs name where the strategy ran
    # The runner stays open for its caller: a later replay goes on with the same rows.
    later = replay(source, None, market, "2024-03-11", "2024-03-15", runner=runner)
    # The runner's top_k=2, not the default 10
    assert len(later.nav) == 5 and later.max_weight.min() > 0.4


def test_bad_ranges_and_unknown_targets_are_errors() -> None:
    panels = random_panels(SYMBOLS, days=30)
    with pytest.raises(OomrlError, match="no sessions"):
        run("daily_momentum", panels)  # the data ends before March

    class Rogue:
        name = "rogue"
        Params = registry.get("daily_momentum").Params

        def rebalance_due(self, day, last):
            return True

        def target_weights(self, view, holdings, params):
            return {"999999.SH": 0.5}

    with pytest.raises(OomrlError, match="without market data"):
        replay(InProcessStrategy(Rogue()), None, panels, "2024-01-10", "2024-02-01")

    class Leveraged(Rogue):
        def target_weights(self, view, holdings, params):
            return {SYMBOLS[0]: 0.8, SYMBOLS[1]: 0.8}

    with pytest.raises(OomrlError, match="invalid weights"):
        replay(InProcessStrategy(Leveraged()), None, panels, "2024-01-10", "2024-02-01")


def test_an_idle_strategy_keeps_its_cash() -> None:
    panels = random_panels(SYMBOLS, days=200)
    result = run("weekly_liquidity", panels, params={"min_adv": 1e15})
    assert result.fills.empty and result.summary()["net_return"] == 0.0
