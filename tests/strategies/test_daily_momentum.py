"""The Phase-1 baseline: daily schedule, top-K by short momentum, equal weight, no liquidity checks.

Called through the strategy host (`strategy_host`), the way the engine calls it: S never runs here.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from strategy_host import open_strategy


def ramp_panels(rates: dict[str, float], days: int = 12) -> dict[str, pd.DataFrame]:
    """Closes compounding at a fixed daily rate per symbol; tiny volume (illiquid on purpose)."""
    index = pd.bdate_range("2024-03-01", periods=days)
    close = pd.DataFrame(
        {s: 10.0 * (1 + r) ** np.arange(days) for s, r in rates.items()}, index=index
    )
    volume = pd.DataFrame(1.0, index=index, columns=list(rates))
    return {"close": close, "volume": volume}


def test_trades_every_new_session() -> None:
    strategy = open_strategy("daily_momentum")
    assert strategy.rebalance_due(date(2024, 3, 4), None)
    assert strategy.rebalance_due(date(2024, 3, 5), date(2024, 3, 4))
    assert not strategy.rebalance_due(date(2024, 3, 4), date(2024, 3, 4))


def test_picks_the_top_k_movers_with_equal_weight_even_when_illiquid() -> None:
    panels = ramp_panels({"A": 0.01, "B": 0.03, "C": -0.02, "D": 0.02})
    strategy = open_strategy("daily_momentum", top_k=2, lookback=3, gross_exposure=0.9)
    weights = strategy.target_weights(panels)
    assert weights == {"B": pytest.approx(0.45), "D": pytest.approx(0.45)}


def test_only_index_members_are_picked() -> None:
    panels = ramp_panels({"A": 0.01, "B": 0.03, "C": -0.02, "D": 0.02})
    weights = open_strategy("daily_momentum", top_k=2, lookback=3).target_weights(
        panels, members=["A", "C"]
    )
    assert weights == {"A": pytest.approx(0.49), "C": pytest.approx(0.49)}


def test_ignores_names_without_a_bar_on_the_decision_date() -> None:
    panels = ramp_panels({"A": 0.01, "B": 0.03, "C": 0.02})
    panels["close"].iloc[-1, 1] = np.nan  # B is suspended on the decision date
    weights = open_strategy("daily_momentum", top_k=1, lookback=2).target_weights(
        panels, holdings={"B": 0.5}
    )
    assert list(weights) == ["C"]


def test_decides_on_as_of_with_only_the_rows_up_to_it() -> None:
    panels = ramp_panels({"A": 0.03, "B": 0.0}, days=12)
    panels["close"].iloc[-2:, 1] = 100.0  # B leaps after the decision date
    strategy = open_strategy("daily_momentum", top_k=1, lookback=3)
    assert list(strategy.target_weights(panels, as_of=panels["close"].index[-3])) == ["A"]
    assert list(strategy.target_weights(panels)) == ["B"]


def test_rotates_the_whole_book_when_leadership_changes() -> None:
    panels = ramp_panels({"A": 0.03, "B": 0.0}, days=12)
    panels["close"].iloc[-3:, 1] = panels["close"].iloc[-4, 1] * np.array([1.1, 1.2, 1.3])
    weights = open_strategy("daily_momentum", top_k=1, lookback=3).target_weights(
        panels, holdings={"A": 0.98}
    )
    assert weights == {"B": pytest.approx(0.98)}


def test_too_little_history_means_no_position() -> None:
    panels = ramp_panels({"A": 0.01}, days=3)
    assert open_strategy("daily_momentum", lookback=5).target_weights(panels) == {}


def test_params_have_valid_defaults_and_validate_their_ranges() -> None:
    defaults = open_strategy("daily_momentum").params
    assert {k: defaults[k] for k in ("top_k", "lookback", "gross_exposure")} == {
        "top_k": 10,
        "lookback": 5,
        "gross_exposure": 0.98,
    }
    with pytest.raises(ValueError, match="top_k"):
        open_strategy("daily_momentum", top_k=0)
    with pytest.raises(ValueError, match="gross_exposure"):
        open_strategy("daily_momentum", gross_exposure=1.5)
    with pytest.raises(ValueError, match="topk"):
        open_strategy("daily_momentum", topk=3)  # a typo is refused, not ignored
