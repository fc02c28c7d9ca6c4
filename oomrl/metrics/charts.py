"""PNG charts of a return series against the CSI 300: equity, underwater curve, rolling IR by version."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.dates as mdates
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from oomrl.metrics.performance import (
    ROLLING_IR_WINDOW,
    Phase,
    drawdown_series,
    rolling_information_ratio,
    wealth,
)

FIGSIZE = (10.0, 4.8)
DPI = 110
PORTFOLIO_COLOR = "#1f4e9c"
BENCHMARK_COLOR = "#8c8c8c"
LOSS_COLOR = "#c0392b"
PHASE_COLORS = ("#e8f0fb", "#fdf2e3", "#eaf6ec", "#f6e9f3", "#fbfbe3")


def _figure(title: str) -> tuple[Figure, matplotlib.axes.Axes]:
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=13, loc="left")
    ax.grid(True, color="#dddddd", linewidth=0.7)
    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("Date")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


def _shade(ax: matplotlib.axes.Axes, phases: list[Phase] | None) -> None:
    """Shade each phase (strategy version or user window) in its own colour, named in the legend.

    A phase that contains another one (e.g. "whole study") is an aggregate and is not shaded.
    """
    spans = phases or []
    shown = [p for p in spans if not any(o is not p and p.start <= o.start and o.end <= p.end for o in spans)]
    for number, phase in enumerate(shown):
        ax.axvspan(phase.start, phase.end, color=PHASE_COLORS[number % len(PHASE_COLORS)],
                   alpha=0.9, zorder=0, label=phase.name)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def equity_chart(returns: pd.Series, benchmark: pd.Series | None, path: Path,
                 label: str = "Portfolio", benchmark_label: str = "CSI 300",
                 phases: list[Phase] | None = None) -> Path:
    """Cumulative return of the portfolio and the benchmark from the same starting capital."""
    fig, ax = _figure(f"Cumulative return: {label} vs {benchmark_label}" if benchmark is not None
                      else f"Cumulative return: {label}")
    _shade(ax, phases)
    ax.plot(returns.index, wealth(returns) - 1.0, color=PORTFOLIO_COLOR, linewidth=1.8, label=label)
    if benchmark is not None:
        ax.plot(benchmark.index, wealth(benchmark) - 1.0, color=BENCHMARK_COLOR, linewidth=1.5,
                linestyle="--", label=benchmark_label)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel("Cumulative return")
    ax.set_xlim(returns.index[0], returns.index[-1])
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9)
    return _save(fig, path)


def underwater_chart(returns: pd.Series, path: Path, label: str = "Portfolio") -> Path:
    """Drawdown from the running high-water mark (the starting capital counts as the first mark)."""
    drawdown = drawdown_series(returns)
    fig, ax = _figure(f"Underwater curve: {label} (max drawdown {drawdown.min():.1%})")
    ax.fill_between(drawdown.index, drawdown, 0.0, color=LOSS_COLOR, alpha=0.35, linewidth=0)
    ax.plot(drawdown.index, drawdown, color=LOSS_COLOR, linewidth=1.2, label="Drawdown")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel("Drawdown from peak")
    ax.set_ylim(top=0.005)
    ax.legend(loc="lower left", frameon=False)
    return _save(fig, path)


def rolling_ir_chart(returns: pd.Series, benchmark: pd.Series, path: Path,
                     phases: list[Phase] | None = None, window: int = ROLLING_IR_WINDOW,
                     benchmark_label: str = "CSI 300") -> Path:
    """Rolling information ratio, with each phase (strategy version) shaded and named (paper Fig. 3)."""
    rolling = rolling_information_ratio(returns, benchmark, window)
    fig, ax = _figure(f"Rolling {window}-day information ratio vs {benchmark_label}")
    _shade(ax, phases)
    ax.plot(rolling.index, rolling, color=PORTFOLIO_COLOR, linewidth=1.6, label=f"{window}-day IR", zorder=3)
    ax.axhline(0.0, color="black", linewidth=0.8, zorder=2)
    ax.set_xlim(returns.index[0], returns.index[-1])
    ax.set_ylabel("Information ratio (annualized)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9,
              title="Strategy version" if phases else None)
    return _save(fig, path)
