"""Rebalance periods: which period (ISO week, fortnight, month, day) a trading day belongs to."""

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
