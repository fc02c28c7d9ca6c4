"""Rebalance periods: which period (ISO week, fortnight, month, day) a trading day belongs to.

Part of the strategy API because the mandate probe (inside a test run's jail) and cross-validation
(in the engine) must agree on it to the day.
"""

from __future__ import annotations

import pandas as pd


def period_key(day: pd.Timestamp, rebalance: str) -> tuple[int, int] | pd.Timestamp:
    """The period a trading day belongs to under a rebalance frequency."""
    year, week, _ = day.isocalendar()
    if rebalance == "weekly":
        return int(year), int(week)
    if rebalance == "biweekly":
        return int(year), (int(week) - 1) // 2
    if rebalance == "monthly":
        return day.year, day.month
    return day
