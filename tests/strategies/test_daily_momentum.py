"""The Phase-1 baseline: daily schedule, top-K by short momentum, equal weight, no liquidity checks."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from strategies.base import MarketView, check_weights
from strategies.daily_momentum import STRATEGY, DailyMomentumParams
from strategies.weekly_liquidity import WeeklyLiquidityParams


def ramp_panels(rates: dict[str, float], days: int = 12) -> dict[str, pd.DataFrame]:
    """Closes compounding at a fixed daily rate per symbol; tiny volume (illiquid on purpose)."""
    index = pd.bdate_range("2024-03-01", periods=days)
    close = pd.DataFrame({s: 10.0 * (1 + r) ** np.arange(days) for s, r in rates.items()}, index=index)
    volume = pd.DataFrame(1.0, index=index, columns=list(rates))
    return {"close": close, "volume": volume}


def test_trades_every_new_session() -> None:
    assert STRATEGY.rebalance_due(date(2024, 3, 4), None)
    assert STRATEGY.rebalance_due(date(2024, 3, 5), date(2024, 3, 4))
    assert not STRATEGY.rebalance_due(date(2024, 3, 4), date(2024, 3, 4))


def test_picks_the_top_k_movers_with_equal_weight_even_when_illiquid() -> None:
    panels = ramp_panels({"A": 0.01, "B": 0.03, "C": -0.02, "D": 0.02})
    view = MarketView(panels, panels["close"].index[-1])
    params = DailyMomentumParams(top_k=2, lookback=3, gross_exposure=0.9)
    weights = STRATEGY.target_weights(view, {}, params)
    assert weights == {"B": pytest.approx(0.45), "D": pytest.approx(0.45)}
    assert check_weights(weights) == weights


def test_ignores_names_without_a_bar_on_the_decision_date() -> None:
    panels = ramp_panels({"A": 0.01, "B": 0.03, "C": 0.02})
    panels["close"].iloc[-1, 1] = np.nan  # B is suspended on the decision date
    view = MarketView(panels, panels["close"].index[-1])
    weights = STRATEGY.target_weights(view, {"B": 0.5}, DailyMomentumParams(top_k=1, lookback=2))
    assert list(weights) == ["C"]


def test_rotates_the_whole_book_when_leadership_changes() -> None:
    panels = ramp_panels({"A": 0.03, "B": 0.0}, days=12)
    panels["close"].iloc[-3:, 1] = panels["close"].iloc[-4, 1] * np.array([1.1, 1.2, 1.3])
    view = MarketView(panels, panels["close"].index[-1])
    weights = STRATEGY.target_weights(view, {"A": 0.98}, DailyMomentumParams(top_k=1, lookback=3))
    assert weights == {"B": pytest.approx(0.98)}


def test_too_little_history_means_no_position() -> None:
    panels = ramp_panels({"A": 0.01}, days=3)
    view = MarketView(panels, panels["close"].index[-1])
    assert STRATEGY.target_weights(view, {}, DailyMomentumParams(lookback=5)) == {}


def test_rejects_another_strategys_params() -> None:
    panels = ramp_panels({"A": 0.01})
    view = MarketView(panels, panels["close"].index[-1])
    with pytest.raises(TypeError, match="DailyMomentumParams"):
        STRATEGY.target_weights(view, {}, WeeklyLiquidityParams())


def test_params_validate_their_ranges() -> None:
    with pytest.raises(ValueError):
        DailyMomentumParams(top_k=0)
    with pytest.raises(ValueError):
        DailyMomentumParams(gross_exposure=1.5)
