"""The mature design: weekly schedule, liquidity filter, ADV-participation cap and turnover budget."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from strategies.base import MarketView, check_weights
from strategies.daily_momentum import DailyMomentumParams
from strategies.weekly_liquidity import FILL_SLACK, STRATEGY, WeeklyLiquidityParams


def market(rates: dict[str, float], values: dict[str, float], days: int = 30) -> dict[str, pd.DataFrame]:
    """Closes compounding at fixed daily rates; `amount` gives each symbol's daily traded value (CNY)."""
    index = pd.bdate_range("2024-05-01", periods=days)
    close = pd.DataFrame({s: 10.0 * (1 + r) ** np.arange(days) for s, r in rates.items()}, index=index)
    volume = pd.DataFrame(1e6, index=index, columns=list(rates))
    amount = pd.DataFrame({s: np.full(days, values[s]) for s in rates}, index=index)
    return {"close": close, "volume": volume, "amount": amount}


def loose(**overrides: float) -> WeeklyLiquidityParams:
    """Params with caps wide open, so one behaviour at a time can be tested."""
    base: dict[str, float] = {"top_k": 2, "lookback": 5, "skip": 0, "adv_window": 5, "min_adv": 1e8,
                              "gross_exposure": 1.0, "max_adv_participation": 1.0,
                              "max_weekly_turnover": 2.0}
    base.update(overrides)
    return WeeklyLiquidityParams(**base)


def test_trades_once_per_iso_week() -> None:
    assert STRATEGY.rebalance_due(date(2024, 7, 1), None)
    assert not STRATEGY.rebalance_due(date(2024, 7, 5), date(2024, 7, 1))
    assert STRATEGY.rebalance_due(date(2024, 7, 8), date(2024, 7, 5))
    assert STRATEGY.rebalance_due(date(2025, 1, 2), date(2024, 12, 27))


def test_liquidity_filter_excludes_thin_names_however_strong() -> None:
    panels = market({"HOT": 0.05, "A": 0.01, "B": 0.02, "C": 0.0},
                    {"HOT": 1e6, "A": 5e8, "B": 5e8, "C": 5e8})
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e7)
    weights = STRATEGY.target_weights(view, {}, loose())
    assert weights == {"A": pytest.approx(0.5), "B": pytest.approx(0.5)}


def test_participation_cap_limits_each_trade_to_a_share_of_adv() -> None:
    panels = market({"A": 0.02, "B": 0.01}, {"A": 2e8, "B": 1e9})
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e9)
    weights = STRATEGY.target_weights(view, {}, loose(max_adv_participation=0.05))
    # 5 % of 2e8 is 1e7 CNY, 1 % of a 1e9 book; B's cap (5e7, 5 %) also binds below 50 %.
    # Targets keep 3 % slack under each cap for price moves before the fill.
    assert FILL_SLACK == 0.97
    assert weights["A"] == pytest.approx(0.01 * 0.97)
    assert weights["B"] == pytest.approx(0.05 * 0.97)


def test_participation_cap_also_slows_down_selling() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 2e8})
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e9)
    weights = STRATEGY.target_weights(view, {"OLD": 0.3}, loose(max_adv_participation=0.05))
    assert weights["OLD"] == pytest.approx(0.3 - 0.01 * 0.97)  # about 1e7 of OLD may be sold


def test_turnover_budget_scales_the_whole_trade() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 1e9})
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e7)
    weights = STRATEGY.target_weights(view, {"OLD": 1.0}, loose(max_weekly_turnover=0.3))
    assert sum(abs(weights.get(s, 0.0) - w) for s, w in {"OLD": 1.0, "A": 0.0, "B": 0.0}.items()) \
        == pytest.approx(0.3 * 0.97)
    assert weights["OLD"] == pytest.approx(1 - 0.291 / 2)  # the 2.0 of wanted trades scaled to 0.291
    assert weights["A"] == pytest.approx(0.5 * 0.291 / 2)
    assert check_weights(weights) == weights


def test_within_budget_the_target_is_the_ideal_book_and_sold_names_drop_out() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 1e9})
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e7)
    weights = STRATEGY.target_weights(view, {"OLD": 0.1, "A": 0.4}, loose(gross_exposure=0.8))
    assert weights == {"A": pytest.approx(0.4), "B": pytest.approx(0.4)}


def test_names_without_recent_trading_are_frozen() -> None:
    panels = market({"A": 0.02, "SUS": 0.0}, {"A": 1e9, "SUS": 1e9})
    panels["close"].iloc[-1, 1] = np.nan  # SUS has no bar on the decision date
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e7)
    weights = STRATEGY.target_weights(view, {"SUS": 0.2}, loose(top_k=1, gross_exposure=0.5))
    assert weights == {"A": pytest.approx(0.3), "SUS": pytest.approx(0.2)}  # 0.5 in all


def test_buys_never_push_the_book_past_gross_exposure_when_sells_are_capped() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 2e8})
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e9)
    weights = STRATEGY.target_weights(view, {"OLD": 0.9}, loose(max_adv_participation=0.05,
                                                                gross_exposure=0.95))
    assert weights["OLD"] == pytest.approx(0.9 - 0.0097)  # only ~1 % of the book may be sold
    assert sum(weights.values()) == pytest.approx(0.95)
    assert weights["A"] == pytest.approx(weights["B"]) == pytest.approx((0.95 - 0.8903) / 2)
    assert check_weights(weights) == weights


def test_skip_ignores_the_most_recent_sessions() -> None:
    panels = market({"A": 0.0, "B": 0.01}, {"A": 1e9, "B": 1e9}, days=30)
    panels["close"].iloc[-2:, 0] = 20.0  # A jumps only in the last two sessions
    view = MarketView(panels, panels["close"].index[-1], portfolio_value=1e7)
    assert list(STRATEGY.target_weights(view, {}, loose(top_k=1, skip=2))) == ["B"]
    assert list(STRATEGY.target_weights(view, {}, loose(top_k=1, skip=0))) == ["A"]


def test_rejects_another_strategys_params_and_bad_ranges() -> None:
    panels = market({"A": 0.01}, {"A": 1e9})
    view = MarketView(panels, panels["close"].index[-1])
    with pytest.raises(TypeError, match="WeeklyLiquidityParams"):
        STRATEGY.target_weights(view, {}, DailyMomentumParams())
    with pytest.raises(ValueError):
        WeeklyLiquidityParams(max_adv_participation=0.0)
    defaults = WeeklyLiquidityParams()
    assert (defaults.max_adv_participation, defaults.max_weekly_turnover) == (0.05, 0.3)
