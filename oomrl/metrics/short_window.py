"""The short-window rule: no annualized figure for fewer than MIN_ANNUALIZED_SESSIONS sessions.

Annualizing 8 sessions turns one good week into "113 % a year" and a Sharpe ratio of 5. Under the
minimum, every report leaves the annualized figures out (shown as —) and says why. Reports are the
tearsheet, summary, PNG, Prefect artifacts and the demo's Table 1. Cumulative figures stay: return
over the window, max drawdown, costs in CNY, turnover summed. The minimum is about a quarter of
sessions, the rolling IR's window. The paper's Table 1 annualizes its 73-session Phase 1, which
this keeps. GIPS goes further and annualizes nothing under a year. `oomrl metrics` still computes
every key: it is a calculator asked for numbers, not a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

MIN_ANNUALIZED_SESSIONS = 60

# Figures that scale a window up to a year: returns and costs "a year". Also the ratios annualized
# with them (√252 in Sharpe, Sortino, IR; CAGR in Calmar).
ANNUALIZED_KEYS = frozenset(
    {
        "annualized_return",
        "cagr",
        "benchmark_annualized_return",
        "benchmark_cagr",
        "excess_return",
        "volatility",
        "sharpe",
        "sortino",
        "calmar",
        "tracking_error",
        "information_ratio",
        "alpha_annualized",
        "turnover_annualized",
        "cost_drag",
        "slippage_leakage_annualized",
    }
)


def too_short(sessions: Any) -> bool:
    """Whether a window of `sessions` is too short to annualize."""
    return int(sessions or 0) < MIN_ANNUALIZED_SESSIONS


def without_annualized(values: Mapping[str, Any], sessions: Any) -> dict[str, Any]:
    """The values with every annualized figure set to None when the window is too short."""
    if not too_short(sessions):
        return dict(values)
    return {key: None if key in ANNUALIZED_KEYS else value for key, value in values.items()}


def rows_without_annualized(table: pd.DataFrame, sessions_column: str = "sessions") -> pd.DataFrame:
    """The table (one row per window) with its too-short rows' annualized figures set to None."""
    if sessions_column not in table.columns or table.empty:
        return table
    short = table[sessions_column].map(too_short).to_numpy(dtype=bool)
    columns = [c for c in table.columns if c in ANNUALIZED_KEYS]
    if not short.any() or not columns:
        return table
    out = table.astype({c: object for c in columns})
    out.loc[short, columns] = None
    return out


def caveat(sessions: Any, what: str = "the window") -> str | None:
    """The sentence a report shows above its figures when `what` is too short, else None."""
    if not too_short(sessions):
        return None
    return (
        f"{what} has {int(sessions or 0)} session(s), fewer than "
        f"{MIN_ANNUALIZED_SESSIONS}: too short to "
        "annualize, so no annualized figure (return, CAGR, volatility, Sharpe, IR, alpha, "
        "turnover or "
        "costs a year) is shown (—); the cumulative figures are."
    )


def short_windows(
    table: pd.DataFrame, name_column: str, sessions_column: str = "sessions"
) -> list[str]:
    """Names of the rows (versions, phases) too short to annualize, for one caveat naming them."""
    if table is None or sessions_column not in table.columns:
        return []
    return [
        str(name)
        for name, n in zip(table[name_column], table[sessions_column], strict=True)
        if too_short(n)
    ]
