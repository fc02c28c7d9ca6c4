"""The repair's evidence chart: cumulative return, net of friction, of each compared version.

The versions are the candidate, the active version and baseline B. The chart spans
cross-validation's long window, with the alert window shaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from oomrl.metrics import charts

if TYPE_CHECKING:
    from oomrl.repair.crossval import CrossValidation

VERSION_STYLES = {
    "candidate": {"color": charts.PROMOTION_COLOR, "linewidth": 1.9},
    "active": {"color": charts.PORTFOLIO_COLOR, "linewidth": 1.6},
    "baseline": {"color": charts.BENCHMARK_COLOR, "linewidth": 1.4, "linestyle": "--"},
}


def evidence_chart(cross: CrossValidation, path: Path) -> Path:
    """Draw the long-window replays of every version into `path` (PNG)."""
    fig, ax = charts._figure()
    longs = [row for row in cross.rows if row.window == "long" and row.dates]
    dates = pd.DatetimeIndex(sorted({d for row in longs for d in row.dates}))
    charts.style_axes(ax, "Cross-validation: cumulative return net of friction", dates)
    ax.axvspan(
        pd.Timestamp(cross.start),
        pd.Timestamp(cross.end),
        color=charts.PHASE_COLORS[1],
        zorder=0,
        label=f"alert window ({cross.start} .. {cross.end})",
    )
    for row in longs:
        returns = pd.Series(row.returns, index=pd.DatetimeIndex(row.dates))
        curve = charts.with_gaps((1.0 + returns).cumprod() - 1.0)
        # The candidate has no commit yet
        commit = f" ({row.sha[:8]})" if row.sha != row.version else ""
        ax.plot(
            curve.index,
            curve,
            label=f"{row.version}{commit}: {row.net_return:+.1%}",
            **VERSION_STYLES.get(row.version, {}),  # type: ignore[arg-type]
        )
    ax.axhline(0.0, color="black", linewidth=0.8)
    if len(dates):
        ax.set_xlim(dates[0], dates[-1])
    charts.percent_axis(ax)
    ax.set_ylabel("Cumulative return")
    ax.legend(**charts.LEGEND)
    return charts._save(fig, path)
