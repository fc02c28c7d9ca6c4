"""PNG charts of a return series against the CSI 300: equity, underwater, rolling IR and friction,
with strategy versions shaded and alerts, repairs and promotions marked.

Each chart is a `draw_*` function onto given axes (the one-page tearsheet.png reuses them) and a
file-writing wrapper of the same name without the prefix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.dates as mdates
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from oomrl.metrics.marks import Mark
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
ALERT_COLORS = {"critical": "#c0392b", "warning": "#e67e22"}
REPAIR_COLOR = "#7d3c98"
PROMOTION_COLOR = "#1e8449"
LEGEND: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.0, 1.0), "frameon": False, "fontsize": 9}


def style_axes(ax: Axes, title: str) -> Axes:
    """Title, light grid, concise date ticks, no top/right spines."""
    ax.set_title(title, fontsize=12, loc="left")
    ax.grid(True, color="#dddddd", linewidth=0.7)
    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


def _figure() -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _shade(ax: Axes, phases: list[Phase] | None) -> None:
    """Shade each phase (strategy version or user window) in its own colour, named in the legend.

    A phase that contains another one (e.g. "whole study") is an aggregate and is not shaded.
    """
    spans = phases or []
    shown = [p for p in spans if not any(o is not p and p.start <= o.start and o.end <= p.end for o in spans)]
    for number, phase in enumerate(shown):
        ax.axvspan(phase.start, phase.end, color=PHASE_COLORS[number % len(PHASE_COLORS)],
                   alpha=0.9, zorder=0, label=phase.name)


def _mark(ax: Axes, marks: list[Mark] | None) -> None:
    """Alerts as triangles along the bottom, repairs as diamonds along the top, promotions as labelled
    dashed lines; each kind appears once in the legend."""
    seen: set[str] = set()
    transform = ax.get_xaxis_transform()  # x in data, y in axes fraction

    def once(name: str) -> str:
        shown = name not in seen
        seen.add(name)
        return name if shown else "_nolegend_"

    for mark in marks or []:
        if mark.kind == "alert":
            color = ALERT_COLORS.get(mark.severity, ALERT_COLORS["warning"])
            # A critical alert is drawn above a warning of the same day whatever their ledger order.
            ax.plot([mark.date], [0.03], marker="^", markersize=7, color=color, linestyle="none",
                    transform=transform, zorder=6 if mark.severity == "critical" else 5, clip_on=False,
                    label=once(f"{mark.severity or 'warning'} alert"))
        elif mark.kind == "repair":
            ax.plot([mark.date], [0.97], marker="D", markersize=6, color=REPAIR_COLOR, linestyle="none",
                    transform=transform, zorder=5, clip_on=False, label=once("repair started"))
        else:
            ax.axvline(mark.date, color=PROMOTION_COLOR, linestyle="--", linewidth=1.3, zorder=4,
                       label=once("new version trades"))
            ax.text(mark.date, 0.90, f" {mark.label}", transform=transform, color=PROMOTION_COLOR,
                    fontsize=8.5, va="top", ha="left", zorder=6)


def draw_equity(ax: Axes, returns: pd.Series, benchmark: pd.Series | None, label: str = "Portfolio",
                benchmark_label: str = "CSI 300", phases: list[Phase] | None = None,
                marks: list[Mark] | None = None) -> None:
    """Cumulative return of the portfolio and the benchmark from the same starting capital."""
    style_axes(ax, f"Cumulative return: {label} vs {benchmark_label}" if benchmark is not None
               else f"Cumulative return: {label}")
    _shade(ax, phases)
    ax.plot(returns.index, wealth(returns) - 1.0, color=PORTFOLIO_COLOR, linewidth=1.8, label=label)
    if benchmark is not None:
        ax.plot(benchmark.index, wealth(benchmark) - 1.0, color=BENCHMARK_COLOR, linewidth=1.5,
                linestyle="--", label=benchmark_label)
    ax.axhline(0.0, color="black", linewidth=0.8)
    _mark(ax, marks)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel("Cumulative return")
    ax.set_xlim(returns.index[0], returns.index[-1])
    ax.legend(**LEGEND)


def draw_underwater(ax: Axes, returns: pd.Series, label: str = "Portfolio") -> None:
    """Drawdown from the running high-water mark (the starting capital counts as the first mark)."""
    drawdown = drawdown_series(returns)
    style_axes(ax, f"Underwater curve: {label} (max drawdown {drawdown.min():.1%})")
    ax.fill_between(drawdown.index, drawdown, 0.0, color=LOSS_COLOR, alpha=0.35, linewidth=0)
    ax.plot(drawdown.index, drawdown, color=LOSS_COLOR, linewidth=1.2, label="Drawdown")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel("Drawdown from peak")
    ax.set_ylim(top=0.005)
    ax.set_xlim(returns.index[0], returns.index[-1])
    ax.legend(**LEGEND)


def draw_rolling_ir(ax: Axes, returns: pd.Series, benchmark: pd.Series, phases: list[Phase] | None = None,
                    window: int = ROLLING_IR_WINDOW, benchmark_label: str = "CSI 300",
                    marks: list[Mark] | None = None) -> None:
    """Rolling information ratio, with each phase (strategy version) shaded and named (paper Fig. 3)."""
    rolling = rolling_information_ratio(returns, benchmark, window)
    style_axes(ax, f"Rolling {window}-day information ratio vs {benchmark_label}")
    _shade(ax, phases)
    ax.plot(rolling.index, rolling, color=PORTFOLIO_COLOR, linewidth=1.6, label=f"{window}-day IR", zorder=3)
    ax.axhline(0.0, color="black", linewidth=0.8, zorder=2)
    _mark(ax, marks)
    ax.set_xlim(returns.index[0], returns.index[-1])
    ax.set_ylabel("Information ratio (annualized)")
    ax.legend(**LEGEND, title="Strategy version" if phases and not marks else None)


def draw_friction(ax: Axes, by_month: pd.DataFrame, marks: list[Mark] | None = None) -> None:
    """Month by month: costs and slippage leakage in basis points of NAV (bars), turnover (line)."""
    style_axes(ax, "Friction by month: costs, slippage leakage and turnover")
    months = pd.PeriodIndex(by_month["month"], freq="M")
    centers = months.to_timestamp(how="start") + pd.Timedelta(days=14)
    width = pd.Timedelta(days=12)
    ax.bar(centers - width / 2, by_month["cost_bps"] * 1e4, width=width, color="#5d6d7e",
           label="costs (bp of NAV)", zorder=3)
    ax.bar(centers + width / 2, by_month["leakage_bps"] * 1e4, width=width, color=LOSS_COLOR, alpha=0.8,
           label="slippage leakage (bp of NAV)", zorder=3)
    ax.set_ylabel("Basis points of NAV a month")
    turnover = ax.twinx()
    turnover.plot(centers, by_month["turnover"], color=PORTFOLIO_COLOR, marker="o", markersize=3,
                  linewidth=1.4, label="turnover (× NAV a month)")
    turnover.set_ylabel("Turnover (× NAV a month)")
    turnover.set_ylim(bottom=0)
    turnover.spines["top"].set_visible(False)
    _mark(ax, [m for m in marks or [] if m.kind == "promotion"])
    bars, names = ax.get_legend_handles_labels()
    line, line_names = turnover.get_legend_handles_labels()
    ax.legend(bars + line, names + line_names, **{**LEGEND, "bbox_to_anchor": (1.07, 1.0)})
    ax.set_xlim(centers.min() - pd.Timedelta(days=20), centers.max() + pd.Timedelta(days=20))


def equity_chart(returns: pd.Series, benchmark: pd.Series | None, path: Path,
                 label: str = "Portfolio", benchmark_label: str = "CSI 300",
                 phases: list[Phase] | None = None, marks: list[Mark] | None = None) -> Path:
    fig, ax = _figure()
    draw_equity(ax, returns, benchmark, label, benchmark_label, phases, marks)
    return _save(fig, path)


def underwater_chart(returns: pd.Series, path: Path, label: str = "Portfolio") -> Path:
    fig, ax = _figure()
    draw_underwater(ax, returns, label)
    return _save(fig, path)


def rolling_ir_chart(returns: pd.Series, benchmark: pd.Series, path: Path,
                     phases: list[Phase] | None = None, window: int = ROLLING_IR_WINDOW,
                     benchmark_label: str = "CSI 300", marks: list[Mark] | None = None) -> Path:
    fig, ax = _figure()
    draw_rolling_ir(ax, returns, benchmark, phases, window, benchmark_label, marks)
    return _save(fig, path)


def friction_chart(by_month: pd.DataFrame, path: Path, marks: list[Mark] | None = None) -> Path:
    fig, ax = _figure()
    draw_friction(ax, by_month, marks)
    return _save(fig, path)
