"""Monthly, yearly and drawdown-period tables, and the glossary's labels and units."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from oomrl.metrics.labels import GLOSSARY, format_value, label
from oomrl.metrics.performance import METRIC_KEYS, max_drawdown
from oomrl.metrics.periods import drawdown_periods, monthly_returns, yearly_returns
from tests.metrics.conftest import random_pair


def test_monthly_and_yearly_returns_compound_the_days() -> None:
    port, bench = random_pair(3, n=300)
    table = monthly_returns(port)
    january = port.loc["2024-01"]
    assert table.loc[2024, "Jan"] == pytest.approx(float(np.prod(1 + january) - 1))
    assert table.loc[2024, "Year"] == pytest.approx(float(np.prod(1 + port.loc["2024"]) - 1))
    assert np.isnan(table.loc[2025, "Dec"])  # 300 sessions end in early 2025
    yearly = yearly_returns(port, bench).set_index("year")
    assert yearly.loc[2024, "portfolio"] == pytest.approx(table.loc[2024, "Year"])
    assert yearly.loc[2024, "excess"] == pytest.approx(
        yearly.loc[2024, "portfolio"] - yearly.loc[2024, "benchmark"]
    )
    assert yearly["sessions"].sum() == len(port)
    assert list(yearly_returns(port).columns) == ["year", "sessions", "portfolio"]


def test_drawdown_periods_on_a_hand_made_path() -> None:
    dates = pd.bdate_range("2025-01-06", periods=9)
    # wealth: 0.9 (from the starting capital), 1.0 (recovered), 1.1 peak, 0.99, 0.88 valley, 1.1
    # recovered, 1.2 peak, 1.08 and the data ends under water
    wealth = np.array([0.9, 1.0, 1.1, 0.99, 0.88, 1.1, 1.2, 1.08, 1.14])
    returns = pd.Series(wealth / np.concatenate([[1.0], wealth[:-1]]) - 1, index=dates)
    table = drawdown_periods(returns)
    assert table.loc[0, "depth"] == pytest.approx(-0.2) == pytest.approx(max_drawdown(returns))
    first = table.iloc[0].to_dict()
    assert (first["peak"], first["valley"], first["recovery"]) == (
        "2025-01-08",
        "2025-01-10",
        "2025-01-13",
    )
    assert (first["to_valley"], first["to_recovery"], first["length"]) == (2, 1, 3)
    start = table[table["peak"] == "start"].iloc[0]
    assert (
        start["valley"] == "2025-01-06"
        and start["recovery"] == "2025-01-07"
        and start["length"] == 2
    )
    still_open = table[table["recovery"].isna()].iloc[0]
    assert still_open["peak"] == "2025-01-14" and still_open["length"] == 2
    assert pd.isna(still_open["to_recovery"])
    assert drawdown_periods(pd.Series([0.01, 0.02], index=dates[:2])).empty
    assert len(drawdown_periods(returns, top=1)) == 1


def test_every_metric_has_a_human_label_with_a_definition() -> None:
    for key in METRIC_KEYS:
        entry = label(key)
        assert entry.definition and entry.name != key, key
        assert "_" not in entry.heading
    assert label("annualized_return").heading == "Annualized return (% a year)"
    assert label("costs_total").heading == "Costs paid (CNY)"
    assert label("no_such_key").heading == "no such key"
    assert all(entry.definition.endswith(".") for entry in GLOSSARY.values())


def test_values_are_rounded_in_their_unit() -> None:
    assert format_value("sharpe", None) == "—" and format_value("cagr", 0.1234) == "12.34 %"
    assert format_value("beta", 1.23456) == "1.235" and format_value("sessions", 5) == "5"
    assert format_value("phase", "x") == "x" and format_value("sharpe", float("nan")) == "—"
    assert format_value("costs_total", 1234567.891) == "1,234,568"
    assert format_value("turnover_annualized", 16.4321) == "16.43×"
    assert format_value("leakage_bps", 0.012345) == "123.5"
    assert format_value("adv_participation_mean", 0.000058) == "0.006 %"
    assert format_value("year", 2024) == "2024" and format_value("coef", 0.000123456) == "0.00012"
    assert format_value("trading_days", 1234) == "1,234"
