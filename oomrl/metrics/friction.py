"""The friction story from the ledger: turnover, costs by kind, slippage leakage, ADV participation.

It is told per strategy version and month by month. Inputs are the ledger's nav_frame and
fills_frame. nav_frame is per session: turnover = value traded ÷ NAV, costs in CNY,
slippage_leakage = frictionless − realized return. fills_frame is per fill: costs by kind in CNY
and the fill's share of the symbol's ADV. Nothing here is estimated: every figure sums ledger rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from oomrl.metrics.performance import PERIODS_PER_YEAR, Phase

COST_KINDS = ("commission", "stamp_duty", "transfer_fee", "impact_cost")
ADV_CAP = 0.05  # the ADV cap repair mandates usually set; fills above it are counted


@dataclass(frozen=True)
class Friction:
    """Per-version and monthly friction tables of one account."""

    by_version: pd.DataFrame
    by_month: pd.DataFrame


def _nav_before(nav: pd.DataFrame) -> pd.Series:
    """NAV at the start of each session (before its trades): nav ÷ (1 + realized return)."""
    return nav["nav"] / (1.0 + nav["realized_return"])


def friction_row(nav: pd.DataFrame, fills: pd.DataFrame) -> dict[str, float | int | None]:
    """The friction figures of one span of sessions (nav rows) and the fills inside it."""
    sessions = len(nav)
    traded = nav["turnover"] > 0
    cost_share = nav["costs"] / _nav_before(nav)
    participation = fills["adv_participation"].astype(float)
    row: dict[str, float | int | None] = {
        "sessions": sessions,
        "rebalances": int(traded.sum()),
        "turnover": float(nav["turnover"].sum()),
        "turnover_annualized": float(nav["turnover"].sum()) / sessions * PERIODS_PER_YEAR
        if sessions
        else None,
        "turnover_per_rebalance": float(nav.loc[traded, "turnover"].mean())
        if traded.any()
        else None,
        "costs_total": float(nav["costs"].sum()),
        "cost_drag": float(cost_share.sum()) / sessions * PERIODS_PER_YEAR if sessions else None,
        **{kind: float(fills[kind].sum()) for kind in COST_KINDS},
        "slippage_leakage": float(nav["slippage_leakage"].sum()),
        "slippage_leakage_annualized": (
            float(nav["slippage_leakage"].sum()) / sessions * PERIODS_PER_YEAR if sessions else None
        ),
        "fills": len(fills),
        "adv_participation_mean": float(participation.mean()) if len(fills) else None,
        "adv_participation_max": float(participation.max()) if len(fills) else None,
        "fills_over_cap": float((participation > ADV_CAP).mean()) if len(fills) else None,
        # the paper's reward (Eq. 1-2), summed: what the outer loop optimises, terminal penalty
        # included
        "reward_total": float(nav["reward"].sum()) if "reward" in nav and sessions else None,
    }
    return row


def _within(frame: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    dates = pd.to_datetime(frame["date"])
    return frame.loc[(dates >= start) & (dates <= end)]


def friction_by_version(
    nav: pd.DataFrame, fills: pd.DataFrame, phases: list[Phase]
) -> pd.DataFrame:
    """One row per phase (strategy version) and one for the whole window."""
    dates = pd.to_datetime(nav["date"])
    spans = [(p.name, p.start, p.end) for p in phases]
    if len(spans) != 1:
        spans.append(("whole window", dates.min(), dates.max()))
    rows = [
        {"version": name, **friction_row(_within(nav, start, end), _within(fills, start, end))}
        for name, start, end in spans
    ]
    return pd.DataFrame(rows)


def friction_by_month(nav: pd.DataFrame, fills: pd.DataFrame) -> pd.DataFrame:
    """Month by month: turnover (× NAV), costs and leakage (bp of NAV), fills.

    Also the fills' mean ADV participation."""
    month = pd.to_datetime(nav["date"]).dt.to_period("M")
    fill_month = pd.to_datetime(fills["date"]).dt.to_period("M")
    frame = pd.DataFrame(
        {
            "turnover": nav["turnover"].groupby(month).sum(),
            "cost_bps": (nav["costs"] / _nav_before(nav)).groupby(month).sum(),
            "leakage_bps": nav["slippage_leakage"].groupby(month).sum(),
        }
    )
    frame["fills"] = fills.groupby(fill_month).size().reindex(frame.index).fillna(0).astype(int)
    frame["adv_participation_mean"] = (
        fills["adv_participation"].astype(float).groupby(fill_month).mean().reindex(frame.index)
    )
    frame.index = frame.index.astype(str)
    frame.index.name = "month"
    return frame.reset_index()


def account_friction(nav: pd.DataFrame, fills: pd.DataFrame, phases: list[Phase]) -> Friction:
    """Both tables for an account's ledger rows."""
    nav = nav.assign(date=pd.to_datetime(nav["date"])).sort_values("date")
    fills = (
        fills.assign(date=pd.to_datetime(fills["date"]))
        if len(fills)
        else pd.DataFrame(
            {
                "date": pd.Series(dtype="datetime64[ns]"),
                **{k: pd.Series(dtype=float) for k in (*COST_KINDS, "adv_participation")},
            }
        )
    )
    return Friction(friction_by_version(nav, fills, phases), friction_by_month(nav, fills))


def friction_is_empty(friction: Friction) -> bool:
    """True when the account never traded (nothing to tell)."""
    return bool(np.isclose(friction.by_version["rebalances"].sum(), 0))
