"""PNG charts of a return series against the CSI 300: equity, underwater, rolling IR, friction.

Strategy versions are shaded; alerts, repairs and promotions are marked. Each chart is a `draw_*`
function onto given axes (the one-page tearsheet.png reuses them). Each also has a file-writing
wrapper of the same name without the prefix. Every chart keeps these rules (tests/metrics/
test_chart_rules.py).
- No two tick labels of an axis alike.
- A break in the line marks a stretch of more than MAX_JOIN_DAYS calendar days without a
  session (a holiday, a halt). It is never a straight segment across it.
- Marks closer than MIN_MARK_SPACING of the axis are drawn as one, with their count. So they stay
  legible over hundreds of sessions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, PercentFormatter

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
PROBATION_COLOR = "#b9770e"
PROBATION_LINES: dict[str, tuple[str, str, float]] = {
    "probation": (":", "probation starts", 0.80),
    "decision": ("-.", "probation decided", 0.70),
}
LEGEND: dict[str, Any] = {
    "loc": "upper left",
    "bbox_to_anchor": (1.0, 1.0),
    "frameon": False,
    "fontsize": 9,
}
# A weekend and one holiday: sessions further apart than this are not joined by a line
MAX_JOIN_DAYS = 4
# Of the axis width: about a marker's width on the narrowest chart (the 10-inch PNG)
MIN_MARK_SPACING = 0.015
MAX_TICK_DECIMALS = 4
DATE_FORMATS = ("%Y", "%b %Y", "%d %b", "%d %b %Y")  # shortest first
FEW_SESSIONS = 12  # up to this many sessions, each gets its own date tick
SEVERITY_ORDER = {"critical": 0, "warning": 1}


class DistinctPercentFormatter(PercentFormatter):
    """PercentFormatter with as few decimals as keep every tick label of the axis distinct.

    Ticks 0 %, −0.5 %, −1 % are never shown as 0 %, 0 %, −1 %."""

    def format_ticks(self, values: Any) -> list[str]:
        labels: list[str] = []
        for decimals in range(MAX_TICK_DECIMALS + 1):
            self.decimals = decimals
            labels = [self(value, number) for number, value in enumerate(values)]
            if len(set(labels)) == len(labels):
                break
        return labels


def percent_axis(ax: Axes) -> None:
    """Fractions on the y axis shown as percentages whose labels never repeat."""
    ax.yaxis.set_major_formatter(DistinctPercentFormatter(1.0, decimals=0))


def with_gaps(series: pd.Series, max_days: int = MAX_JOIN_DAYS) -> pd.Series:
    """The series with a NaN inside every stretch of more than `max_days` days without a point.

    Days are calendar days. So a line (or a fill) breaks there instead of bridging a holiday or a
    halt."""
    if len(series) < 2:
        return series
    index = pd.DatetimeIndex(series.index)
    far = np.flatnonzero((index[1:] - index[:-1]) > pd.Timedelta(days=max_days))
    if not len(far):
        return series
    holes = pd.Series(np.nan, index=index[far] + pd.Timedelta(days=1))
    return pd.concat([series, holes]).sort_index()


class DistinctDateFormatter(mdates.DateFormatter):
    """Date tick labels in the shortest of DATE_FORMATS that names every tick differently.

    So `2025`, `Jul 2024`, `15 Jul`; never `Jul` for two Julys or `15` for every month's middle."""

    def __init__(self) -> None:
        super().__init__(DATE_FORMATS[-1])

    def format_ticks(self, values: Any) -> list[str]:
        labels: list[str] = []
        for fmt in DATE_FORMATS:
            labels = [mdates.num2date(value).strftime(fmt) for value in values]
            if len(set(labels)) == len(labels):
                break
        return labels


def date_axis(ax: Axes, dates: pd.DatetimeIndex | None = None) -> None:
    """Daily data never gets intraday ticks.

    A window of few sessions is ticked on its sessions. A longer one is ticked by matplotlib's date
    locator. Labels come from DistinctDateFormatter."""
    if dates is not None and 0 < len(dates) <= FEW_SESSIONS:
        locator: Any = FixedLocator(mdates.date2num(dates))
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(DistinctDateFormatter())


def style_axes(ax: Axes, title: str, dates: pd.DatetimeIndex | None = None) -> Axes:
    """Title, light grid, date ticks that never repeat a label, no top/right spines."""
    ax.set_title(title, fontsize=12, loc="left")
    ax.grid(True, color="#dddddd", linewidth=0.7)
    date_axis(ax, dates)
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
    shown = [
        p
        for p in spans
        if not any(o is not p and p.start <= o.start and o.end <= p.end for o in spans)
    ]
    for number, phase in enumerate(shown):
        ax.axvspan(
            phase.start,
            phase.end,
            color=PHASE_COLORS[number % len(PHASE_COLORS)],
            alpha=0.9,
            zorder=0,
            label=phase.name,
        )


def clusters(
    marks: list[Mark], start: float, end: float, spacing: float = MIN_MARK_SPACING
) -> list[list[Mark]]:
    """Marks in date order, grouped while within `spacing` of the axis of their group's first mark.

    The axis runs from `start` to `end`, in matplotlib date numbers. The groups' first marks, where
    their markers stand, are then at least `spacing` apart."""
    width = max(end - start, 1e-9)
    groups: list[list[Mark]] = []
    for mark in sorted(marks, key=lambda m: m.date):
        if (
            groups
            and (mdates.date2num(mark.date) - mdates.date2num(groups[-1][0].date)) / width < spacing
        ):
            groups[-1].append(mark)
        else:
            groups.append([mark])
    return groups


def _marker(ax: Axes, group: list[Mark], y: float, style: dict[str, Any], label: str) -> None:
    """One marker for a group of marks, on its first mark's date.

    Its count stands beside it when it stands for more than one."""
    first = group[0]
    transform = ax.get_xaxis_transform()  # x in data, y in axes fraction
    ax.plot(
        [first.date],
        [y],
        linestyle="none",
        transform=transform,
        clip_on=False,
        label=label,
        **style,
    )
    if len(group) > 1:
        ax.annotate(
            str(len(group)),
            (mdates.date2num(first.date), y),
            xycoords=transform,
            xytext=(0, 5 if y < 0.5 else -12),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color=style["color"],
            zorder=style["zorder"],
        )


def _mark(ax: Axes, marks: list[Mark] | None) -> None:
    """Alerts, repairs, promotions and probations; each kind once in the legend.

    Call after set_xlim.

    Alerts are triangles along the bottom; repairs are diamonds along the top. Promotions are
    labelled dashed lines. A probation's start (dotted) and decision (dash-dot) are labelled lines
    lower down. A decision sits a session before the promotion it makes. Alerts (and repairs)
    closer than MIN_MARK_SPACING of the axis share one marker. It takes the most severe alert's
    colour and is labelled with their count."""
    seen: set[str] = set()

    def once(name: str) -> str:
        shown = name not in seen
        seen.add(name)
        return name if shown else "_nolegend_"

    start, end = ax.get_xlim()
    for group in clusters([m for m in marks or [] if m.kind == "alert"], start, end):
        # A group is drawn in the colour of its most severe alert, whatever the ledger's order.
        severity = min(
            (m.severity or "warning" for m in group), key=lambda s: SEVERITY_ORDER.get(s, 1)
        )
        style = {
            "marker": "^",
            "markersize": 7,
            "color": ALERT_COLORS.get(severity, ALERT_COLORS["warning"]),
            "zorder": 6 if severity == "critical" else 5,
        }
        _marker(ax, group, 0.03, style, once(f"{severity} alert"))
    repairs = [m for m in marks or [] if m.kind == "repair"]
    for group in clusters(repairs, start, end):
        _marker(
            ax,
            group,
            0.97,
            {"marker": "D", "markersize": 6, "color": REPAIR_COLOR, "zorder": 5},
            once("repair started"),
        )
    for mark in (m for m in marks or [] if m.kind == "promotion"):
        ax.axvline(
            mark.date,
            color=PROMOTION_COLOR,
            linestyle="--",
            linewidth=1.3,
            zorder=4,
            label=once("new version trades"),
        )
        ax.text(
            mark.date,
            0.90,
            f" {mark.label}",
            transform=ax.get_xaxis_transform(),
            color=PROMOTION_COLOR,
            fontsize=8.5,
            va="top",
            ha="left",
            zorder=6,
        )
    for mark in (m for m in marks or [] if m.kind in PROBATION_LINES):
        dashes, legend, height = PROBATION_LINES[mark.kind]
        ax.axvline(
            mark.date,
            color=PROBATION_COLOR,
            linestyle=dashes,
            linewidth=1.3,
            zorder=4,
            label=once(legend),
        )
        ax.text(
            mark.date,
            height,
            f" {mark.label}",
            transform=ax.get_xaxis_transform(),
            color=PROBATION_COLOR,
            fontsize=8,
            va="top",
            ha="left",
            zorder=6,
        )


def draw_equity(
    ax: Axes,
    returns: pd.Series,
    benchmark: pd.Series | None,
    label: str = "Portfolio",
    benchmark_label: str = "CSI 300",
    phases: list[Phase] | None = None,
    marks: list[Mark] | None = None,
) -> None:
    """Cumulative return of the portfolio and the benchmark from the same starting capital."""
    style_axes(
        ax,
        f"Cumulative return: {label} vs {benchmark_label}"
        if benchmark is not None
        else f"Cumulative return: {label}",
        returns.index,
    )
    _shade(ax, phases)
    curve = with_gaps(wealth(returns) - 1.0)
    ax.plot(curve.index, curve, color=PORTFOLIO_COLOR, linewidth=1.8, label=label)
    if benchmark is not None:
        index_curve = with_gaps(wealth(benchmark) - 1.0)
        ax.plot(
            index_curve.index,
            index_curve,
            color=BENCHMARK_COLOR,
            linewidth=1.5,
            linestyle="--",
            label=benchmark_label,
        )
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlim(returns.index[0], returns.index[-1])
    _mark(ax, marks)
    percent_axis(ax)
    ax.set_ylabel("Cumulative return")
    ax.legend(**LEGEND)


def draw_underwater(ax: Axes, returns: pd.Series, label: str = "Portfolio") -> None:
    """Drawdown from the running high-water mark (the starting capital counts as the first mark)."""
    drawdown = drawdown_series(returns)
    style_axes(ax, f"Underwater curve: {label} (max drawdown {drawdown.min():.1%})", returns.index)
    shown = with_gaps(drawdown)
    ax.fill_between(shown.index, shown, 0.0, color=LOSS_COLOR, alpha=0.35, linewidth=0)
    ax.plot(shown.index, shown, color=LOSS_COLOR, linewidth=1.2, label="Drawdown")
    percent_axis(ax)
    ax.set_ylabel("Drawdown from peak")
    ax.set_ylim(top=0.005)
    ax.set_xlim(returns.index[0], returns.index[-1])
    ax.legend(**LEGEND)


def draw_rolling_ir(
    ax: Axes,
    returns: pd.Series,
    benchmark: pd.Series,
    phases: list[Phase] | None = None,
    window: int = ROLLING_IR_WINDOW,
    benchmark_label: str = "CSI 300",
    marks: list[Mark] | None = None,
) -> None:
    """Rolling information ratio, with each phase (strategy version) shaded and named (paper Fig.
    3)."""
    rolling = with_gaps(rolling_information_ratio(returns, benchmark, window))
    style_axes(ax, f"Rolling {window}-day information ratio vs {benchmark_label}", returns.index)
    _shade(ax, phases)
    ax.plot(
        rolling.index,
        rolling,
        color=PORTFOLIO_COLOR,
        linewidth=1.6,
        label=f"{window}-day IR",
        zorder=3,
    )
    ax.axhline(0.0, color="black", linewidth=0.8, zorder=2)
    ax.set_xlim(returns.index[0], returns.index[-1])
    _mark(ax, marks)
    ax.set_ylabel("Information ratio (annualized)")
    ax.legend(**LEGEND, title="Strategy version" if phases and not marks else None)


def draw_friction(ax: Axes, by_month: pd.DataFrame, marks: list[Mark] | None = None) -> None:
    """Month by month: costs and slippage leakage in basis points of NAV (bars), turnover (line)."""
    style_axes(ax, "Friction by month: costs, slippage leakage and turnover")
    months = pd.PeriodIndex(by_month["month"], freq="M")
    centers = months.to_timestamp(how="start") + pd.Timedelta(days=14)
    width = pd.Timedelta(days=12)
    ax.bar(
        centers - width / 2,
        by_month["cost_bps"] * 1e4,
        width=width,
        color="#5d6d7e",
        label="costs (bp of NAV)",
        zorder=3,
    )
    ax.bar(
        centers + width / 2,
        by_month["leakage_bps"] * 1e4,
        width=width,
        color=LOSS_COLOR,
        alpha=0.8,
        label="slippage leakage (bp of NAV)",
        zorder=3,
    )
    ax.set_ylabel("Basis points of NAV a month")
    turnover = ax.twinx()
    turnover.plot(
        centers,
        by_month["turnover"],
        color=PORTFOLIO_COLOR,
        marker="o",
        markersize=3,
        linewidth=1.4,
        label="turnover (× NAV a month)",
    )
    turnover.set_ylabel("Turnover (× NAV a month)")
    turnover.set_ylim(bottom=0)
    turnover.spines["top"].set_visible(False)
    ax.set_xlim(centers.min() - pd.Timedelta(days=20), centers.max() + pd.Timedelta(days=20))
    _mark(ax, [m for m in marks or [] if m.kind == "promotion"])
    bars, names = ax.get_legend_handles_labels()
    line, line_names = turnover.get_legend_handles_labels()
    ax.legend(bars + line, names + line_names, **{**LEGEND, "bbox_to_anchor": (1.07, 1.0)})


def equity_chart(
    returns: pd.Series,
    benchmark: pd.Series | None,
    path: Path,
    label: str = "Portfolio",
    benchmark_label: str = "CSI 300",
    phases: list[Phase] | None = None,
    marks: list[Mark] | None = None,
) -> Path:
    fig, ax = _figure()
    draw_equity(ax, returns, benchmark, label, benchmark_label, phases, marks)
    return _save(fig, path)


def underwater_chart(returns: pd.Series, path: Path, label: str = "Portfolio") -> Path:
    fig, ax = _figure()
    draw_underwater(ax, returns, label)
    return _save(fig, path)


def rolling_ir_chart(
    returns: pd.Series,
    benchmark: pd.Series,
    path: Path,
    phases: list[Phase] | None = None,
    window: int = ROLLING_IR_WINDOW,
    benchmark_label: str = "CSI 300",
    marks: list[Mark] | None = None,
) -> Path:
    fig, ax = _figure()
    draw_rolling_ir(ax, returns, benchmark, phases, window, benchmark_label, marks)
    return _save(fig, path)


def friction_chart(by_month: pd.DataFrame, path: Path, marks: list[Mark] | None = None) -> Path:
    fig, ax = _figure()
    draw_friction(ax, by_month, marks)
    return _save(fig, path)
