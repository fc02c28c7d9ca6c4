from datetime import date

import numpy as np
import pandas as pd
import pytest

from strategy_host import open_strategy


def ramp(rates, days=8):
    index = pd.bdate_range("2024-03-01", periods=days)
    return {"close": pd.DataFrame({s: 10.0 * (1 + r) ** np.arange(days) for s, r in rates.items()}, index=index)}


def test_equal_weight_on_the_two_best_movers():
    panels = ramp({"A": 0.01, "B": 0.03, "C": -0.02, "D": 0.02})
    assert open_strategy("momentum").target_weights(panels) == {"B": 0.5, "D": 0.5}


def test_decides_on_rows_up_to_as_of():
    panels = ramp({"A": 0.01, "B": 0.03, "C": -0.02, "D": 0.02}, days=12)
    panels["close"].iloc[8:, 0] *= 3.0  # A soars after the decision date
    weights = open_strategy("momentum").target_weights(panels, as_of=panels["close"].index[7])
    assert weights == {"B": 0.5, "D": 0.5}


def test_top_one():
    panels = ramp({"A": 0.01, "B": 0.03, "C": -0.02})
    assert open_strategy("momentum", top_k=1).target_weights(panels) == {"B": pytest.approx(1.0)}


def test_nothing_without_enough_history():
    assert open_strategy("momentum", lookback=20).target_weights(ramp({"A": 0.01, "B": 0.02})) == {}


def test_trades_every_new_session():
    strategy = open_strategy("momentum")
    assert strategy.rebalance_due(date(2024, 3, 4), None)
    assert not strategy.rebalance_due(date(2024, 3, 4), date(2024, 3, 4))
