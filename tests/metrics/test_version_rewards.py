"""The paper's reward (Eq. 1-2) per strategy version: in the attribution's friction table and Table
1."""

from __future__ import annotations

import pandas as pd
import pytest

from oomrl.metrics.attribution import version_rewards
from oomrl.metrics.friction import friction_by_version
from oomrl.metrics.performance import Phase


def nav_rows() -> pd.DataFrame:
    dates = pd.bdate_range("2024-07-01", periods=6)
    return pd.DataFrame(
        {
            "date": dates,
            "nav": 1e6,
            "realized_return": 0.0,
            "turnover": [0.5, 0, 0, 0.2, 0, 0],
            "costs": 10.0,
            "slippage_leakage": 0.0,
            "reward": [0.01, 0.002, -0.003, -1.2, 0.001, 0.004],  # -1.2: the halt's −P_terminal
            "strategy_version": ["a"] * 3 + ["b"] * 3,
        }
    )


def test_rewards_sum_per_version_phase() -> None:
    nav = nav_rows()
    phases = [
        Phase("v1", nav["date"][0], nav["date"][2]),
        Phase("v2", nav["date"][3], nav["date"][5]),
    ]
    assert version_rewards(nav, phases) == pytest.approx({"v1": 0.009, "v2": -1.195})


def test_the_friction_table_reports_the_reward_per_version() -> None:
    nav = nav_rows()
    phases = [
        Phase("v1", nav["date"][0], nav["date"][2]),
        Phase("v2", nav["date"][3], nav["date"][5]),
    ]
    fills = pd.DataFrame(
        {
            "date": pd.Series(dtype="datetime64[ns]"),
            "commission": [],
            "stamp_duty": [],
            "transfer_fee": [],
            "impact_cost": [],
            "adv_participation": [],
        }
    )
    table = friction_by_version(nav, fills, phases).set_index("version")
    assert table.loc["v1", "reward_total"] == pytest.approx(0.009)
    assert table.loc["whole window", "reward_total"] == pytest.approx(-1.186)
