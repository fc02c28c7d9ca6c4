"""The mature design: weekly schedule, liquidity filter, ADV-participation cap and turnover budget.

Called through the strategy host (`strategy_host`), the way the engine calls it: S never runs here.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from strategy_host import HostedStrategy, open_strategy

FILL_SLACK = 0.97  # the strategy targets 97 % of each cap (prices move before the fill)


def market(
    rates: dict[str, float], values: dict[str, float], days: int = 30
) -> dict[str, pd.DataFrame]:
    """Closes compounding at fixed daily rates; `amount` gives each symbol's daily traded value
    (CNY)."""
    index = pd.bdate_range("2024-05-01", periods=days)
    close = pd.DataFrame(
        {s: 10.0 * (1 + r) ** np.arange(days) for s, r in rates.items()}, index=index
    )
    volume = pd.DataFrame(1e6, index=index, columns=list(rates))
    amount = pd.DataFrame({s: np.full(days, values[s]) for s in rates}, index=index)
    return {"close": close, "volume": volume, "amount": amount}


def loose(**overrides: float) -> HostedStrategy:
    """The strategy with caps wide open, so one behaviour at a time can be tested."""
    base: dict[str, float] = {
        "top_k": 2,
        "lookback": 5,
        "skip": 0,
        "adv_window": 5,
        "min_adv": 1e8,
        "gross_exposure": 1.0,
        "max_adv_participation": 1.0,
        "max_weekly_turnover": 2.0,
    }
    base.update(overrides)
    return open_strategy("weekly_liquidity", **base)


def valid(weights: dict[str, float]) -> bool:
    """Long-only weights: finite, >= 0, summing to at most 1."""
    return (
        all(np.isfinite(w) and w >= 0 for w in weights.values())
        and sum(weights.values()) <= 1 + 1e-9
    )


def test_trades_once_per_iso_week() -> None:
    strategy = open_strategy("weekly_liquidity")
    assert strategy.rebalance_due(date(2024, 7, 1), None)
    assert not strategy.rebalance_due(date(2024, 7, 5), date(2024, 7, 1))
    assert strategy.rebalance_due(date(2024, 7, 8), date(2024, 7, 5))
    assert strategy.rebalance_due(date(2025, 1, 2), date(2024, 12, 27))


def test_liquidity_filter_excludes_thin_names_however_strong() -> None:
    panels = market(
        {"HOT": 0.05, "A": 0.01, "B": 0.02, "C": 0.0}, {"HOT": 1e6, "A": 5e8, "B": 5e8, "C": 5e8}
    )
    value = 1e7
    weights = loose().target_weights(panels, holdings={}, portfolio_value=value)
    assert weights == {"A": pytest.approx(0.5), "B": pytest.approx(0.5)}


def test_participation_cap_limits_each_trade_to_a_share_of_adv() -> None:
    panels = market({"A": 0.02, "B": 0.01}, {"A": 2e8, "B": 1e9})
    value = 1e9
    weights = loose(max_adv_participation=0.05).target_weights(
        panels, holdings={}, portfolio_value=value
    )
    # 5 % of 2e8 is 1e7 CNY, 1 % of a 1e9 book; B's cap (5e7, 5 %) also binds below 50 %.
    # Targets keep 3 % slack under each cap for price moves before the fill.
    assert weights["A"] == pytest.approx(0.01 * 0.97)
    assert weights["B"] == pytest.approx(0.05 * 0.97)


def test_participation_cap_also_slows_down_selling() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 2e8})
    value = 1e9
    weights = loose(max_adv_participation=0.05).target_weights(
        panels, holdings={"OLD": 0.3}, portfolio_value=value
    )
    assert weights["OLD"] == pytest.approx(0.3 - 0.01 * 0.97)  # about 1e7 of OLD may be sold


def test_turnover_budget_scales_the_whole_trade() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 1e9})
    value = 1e7
    weights = loose(max_weekly_turnover=0.3).target_weights(
        panels, holdings={"OLD": 1.0}, portfolio_value=value
    )
    assert sum(
        abs(weights.get(s, 0.0) - w) for s, w in {"OLD": 1.0, "A": 0.0, "B": 0.0}.items()
    ) == pytest.approx(0.3 * 0.97)
    # The 2.0 of wanted trades scaled to 0.291
    assert weights["OLD"] == pytest.approx(1 - 0.291 / 2)
    assert weights["A"] == pytest.approx(0.5 * 0.291 / 2)
    assert valid(weights)


def test_within_budget_the_target_is_the_ideal_book_and_sold_names_drop_out() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 1e9})
    value = 1e7
    weights = loose(gross_exposure=0.8).target_weights(
        panels, holdings={"OLD": 0.1, "A": 0.4}, portfolio_value=value
    )
    assert weights == {"A": pytest.approx(0.4), "B": pytest.approx(0.4)}


def test_names_without_recent_trading_are_frozen() -> None:
    panels = market({"A": 0.02, "SUS": 0.0}, {"A": 1e9, "SUS": 1e9})
    panels["close"].iloc[-1, 1] = np.nan  # SUS has no bar on the decision date
    value = 1e7
    weights = loose(top_k=1, gross_exposure=0.5).target_weights(
        panels, holdings={"SUS": 0.2}, portfolio_value=value
    )
    assert weights == {"A": pytest.approx(0.3), "SUS": pytest.approx(0.2)}  # 0.5 in all


def test_buys_never_push_the_book_past_gross_exposure_when_sells_are_capped() -> None:
    panels = market({"A": 0.02, "B": 0.01, "OLD": -0.02}, {"A": 1e9, "B": 1e9, "OLD": 2e8})
    value = 1e9
    weights = loose(max_adv_participation=0.05, gross_exposure=0.95).target_weights(
        panels, holdings={"OLD": 0.9}, portfolio_value=value
    )
    assert weights["OLD"] == pytest.approx(0.9 - 0.0097)  # only ~1 % of the book may be sold
    assert sum(weights.values()) == pytest.approx(0.95)
    assert weights["A"] == pytest.approx(weights["B"]) == pytest.approx((0.95 - 0.8903) / 2)
    assert valid(weights)


def test_skip_ignores_the_most_recent_sessions() -> None:
    panels = market({"A": 0.0, "B": 0.01}, {"A": 1e9, "B": 1e9}, days=30)
    panels["close"].iloc[-2:, 0] = 20.0  # A jumps only in the last two sessions
    value = 1e7
    assert list(
        loose(top_k=1, skip=2).target_weights(panels, holdings={}, portfolio_value=value)
    ) == ["B"]
    assert list(
        loose(top_k=1, skip=0).target_weights(panels, holdings={}, portfolio_value=value)
    ) == ["A"]


def test_params_validate_their_ranges_and_the_mandate_caps_default_to_the_documented_values() -> (
    None
):
    with pytest.raises(ValueError, match="max_adv_participation"):
        open_strategy("weekly_liquidity", max_adv_participation=0.0)
    defaults = open_strategy("weekly_liquidity").params
    assert (defaults["max_adv_participation"], defaults["max_weekly_turnover"]) == (0.05, 0.3)
