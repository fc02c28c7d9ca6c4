"""Calendar and drawdown tables of a daily return series: monthly and yearly returns, drawdowns."""

from __future__ import annotations

import calendar

import numpy as np
import pandas as pd

from oomrl.metrics.performance import drawdown_series

MONTHS = [calendar.month_abbr[number] for number in range(1, 13)]


def compounded(returns: pd.Series, by: pd.Index | pd.Series) -> pd.Series:
    """Π(1 + r) − 1 within each group."""
    return (1.0 + returns).groupby(by).prod() - 1.0


def monthly_returns(returns: pd.Series) -> pd.DataFrame:
    """Year × month table of compounded returns, plus the year's total.

    NaN for months without sessions."""
    index = pd.DatetimeIndex(returns.index)
    by_month = compounded(returns, index.to_period("M"))
    table = pd.DataFrame(
        np.nan, index=sorted({p.year for p in by_month.index}), columns=[*MONTHS, "Year"]
    )
    for period, value in by_month.items():
        table.loc[period.year, MONTHS[period.month - 1]] = value
    table["Year"] = compounded(returns, index.year)
    table.index.name = "year"
    return table


def yearly_returns(returns: pd.Series, benchmark: pd.Series | None = None) -> pd.DataFrame:
    """One row per calendar year: sessions, portfolio return.

    With a benchmark, also CSI 300 and excess."""
    index = pd.DatetimeIndex(returns.index)
    frame = pd.DataFrame(
        {
            "sessions": returns.groupby(index.year).size(),
            "portfolio": compounded(returns, index.year),
        }
    )
    if benchmark is not None:
        frame["benchmark"] = compounded(benchmark.reindex(returns.index), index.year)
        frame["excess"] = frame["portfolio"] - frame["benchmark"]
    frame.index.name = "year"
    return frame.reset_index()


def drawdown_periods(returns: pd.Series, top: int = 5) -> pd.DataFrame:
    """The `top` deepest drawdowns: peak, valley and recovery dates, depth, lengths in sessions.

    A drawdown starts after the last session at a running peak. The starting capital is the first
    peak. It ends on the first session back at that peak. One still open at the end of the data has
    no recovery date.
    """
    drawdown = drawdown_series(returns)
    underwater = drawdown < 0
    episode = (~underwater).cumsum()  # constant along one underwater run (and its preceding peak)
    rows = []
    dates = pd.DatetimeIndex(drawdown.index)
    positions = pd.Series(np.arange(len(drawdown)), index=drawdown.index)
    for _, run in drawdown[underwater].groupby(episode[underwater]):
        first = int(positions[run.index[0]])
        peak_position = first - 1  # the session before the first loss (−1: the starting capital)
        valley = run.idxmin()
        last = int(positions[run.index[-1]])
        recovered = last + 1 < len(drawdown)
        rows.append(
            {
                "peak": dates[peak_position].date().isoformat() if peak_position >= 0 else "start",
                "valley": pd.Timestamp(valley).date().isoformat(),
                "recovery": dates[last + 1].date().isoformat() if recovered else None,
                "depth": float(run.min()),
                "to_valley": int(positions[valley]) - peak_position,
                "to_recovery": last + 1 - int(positions[valley]) if recovered else None,
                "length": (last + 1 if recovered else last) - peak_position,
            }
        )
    columns = ["peak", "valley", "recovery", "depth", "to_valley", "to_recovery", "length"]
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values("depth", kind="mergesort").head(top).reset_index(drop=True)
