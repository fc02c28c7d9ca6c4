"""What a quant checks before trusting a chart: no repeated tick label, no line drawn across a
stretch without sessions, marks that stay apart over 400+ sessions, and no annualized figure (with a
caveat saying why) for a window under the stated minimum of sessions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from oomrl.metrics import charts
from oomrl.metrics.io import read_returns_csv
from oomrl.metrics.marks import Mark
from oomrl.metrics.performance import Phase
from oomrl.metrics.short_window import MIN_ANNUALIZED_SESSIONS
from oomrl.metrics.tearsheet import build_report
from tests.metrics.conftest import CSI300_PRICE

CSI300 = read_returns_csv(CSI300_PRICE)
NATIONAL_DAY = (pd.Timestamp("2024-09-30"), pd.Timestamp("2024-10-08"))  # no session in between


def window(start: str, end: str, scale: float = 1.0) -> tuple[pd.Series, pd.Series]:
    """A portfolio (the index scaled, a little noise) and the CSI 300 over [start, end]."""
    bench = CSI300.loc[start:end]
    noise = np.random.default_rng(5).normal(0.0, 0.002, len(bench))
    return (scale * bench + noise).rename("portfolio"), bench


WINDOWS = {  # sessions: 3, 8 (over the National Day holiday), a quiet quarter, 400+
    "3 sessions": window("2024-07-01", "2024-07-03"),
    "8 sessions over a holiday": window("2024-09-25", "2024-10-11"),
    "a quiet quarter": window("2025-06-03", "2025-08-29", scale=0.25),
    "400+ sessions": window("2024-07-01", "2026-02-27"),
}


def drawn(draw: Callable[[Axes], None]) -> Figure:
    """A chart drawn onto a figure of the report's size, laid out as it is saved."""
    fig = Figure(figsize=charts.FIGSIZE, dpi=charts.DPI, layout="constrained")
    draw(fig.add_subplot())
    FigureCanvasAgg(fig).draw()  # what savefig does: ticks, labels and layout are computed here
    return fig


def visible_labels(axis: object) -> list[str]:
    """The major tick labels shown inside the axis' view."""
    low, high = sorted(axis.get_view_interval())  # type: ignore[attr-defined]
    return [
        tick.label1.get_text()
        for tick in axis.get_major_ticks()  # type: ignore[attr-defined]
        if low <= tick.get_loc() <= high and tick.label1.get_visible() and tick.label1.get_text()
    ]


def every_chart(returns: pd.Series, bench: pd.Series) -> dict[str, Figure]:
    by_month = pd.DataFrame(
        {
            "month": ["2024-07", "2024-08", "2024-09"],
            "cost_bps": [0.01, 0.002, 0.0005],
            "leakage_bps": [0.009, 0.001, 0.0004],
            "turnover": [9.0, 1.5, 0.4],
        }
    )
    figures = {
        "equity": drawn(lambda ax: charts.draw_equity(ax, returns, bench)),
        "underwater": drawn(lambda ax: charts.draw_underwater(ax, returns)),
        "friction": drawn(lambda ax: charts.draw_friction(ax, by_month)),
    }
    if len(returns) > 61:
        figures["rolling IR"] = drawn(lambda ax: charts.draw_rolling_ir(ax, returns, bench))
    return figures


@pytest.mark.slow  # draws 14 charts
@pytest.mark.parametrize("name", list(WINDOWS))
def test_no_axis_repeats_a_tick_label(name: str) -> None:
    returns, bench = WINDOWS[name]
    for chart, fig in every_chart(returns, bench).items():
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                labels = visible_labels(axis)
                assert len(labels) == len(set(labels)), (name, chart, labels)


def test_small_drawdowns_get_the_decimals_that_keep_labels_apart() -> None:
    # −3 % in small steps
    returns = pd.Series(-0.0015, index=pd.bdate_range("2025-01-02", periods=20))
    labels = visible_labels(drawn(lambda ax: charts.draw_underwater(ax, returns)).axes[0].yaxis)
    assert len(labels) >= 3 and len(labels) == len(set(labels)), labels
    assert any("." in label for label in labels), labels  # −0.5 % steps need a decimal


def joined_spans(line: Line2D) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Each pair of consecutive points the line joins with a segment (a NaN between them breaks
    it)."""
    xs = [
        pd.Timestamp(mdates.num2date(x)).tz_localize(None) if not isinstance(x, pd.Timestamp) else x
        for x in mdates.date2num(line.get_xdata())
    ]
    ys = np.asarray(line.get_ydata(), dtype=float)
    return [
        (xs[i], xs[i + 1])
        for i in range(len(xs) - 1)
        if np.isfinite(ys[i]) and np.isfinite(ys[i + 1])
    ]


def data_lines(fig: Figure) -> list[Line2D]:
    return [line for ax in fig.axes for line in ax.lines if len(line.get_xdata()) > 2]


@pytest.mark.slow  # draws every chart of half a year
@pytest.mark.parametrize("gap", ["holiday", "halt"])
def test_a_stretch_without_sessions_is_a_gap_in_every_line(gap: str) -> None:
    returns, bench = window("2024-07-01", "2024-12-31")
    if gap == "halt":  # an account not marked for three weeks: no NAV rows, no line
        kept = ~((returns.index > "2024-11-01") & (returns.index < "2024-11-25"))
        returns, bench = returns[kept], bench[kept]
    hole = (
        NATIONAL_DAY
        if gap == "holiday"
        else (pd.Timestamp("2024-11-01"), pd.Timestamp("2024-11-25"))
    )
    figures = every_chart(returns, bench)
    for chart in ("equity", "underwater", "rolling IR"):
        lines = data_lines(figures[chart])
        assert lines, chart
        for line in lines:
            for left, right in joined_spans(line):
                assert right - left <= pd.Timedelta(days=charts.MAX_JOIN_DAYS), (
                    chart,
                    line.get_label(),
                    left,
                    right,
                )
                assert not (left <= hole[0] and hole[1] <= right), (chart, left, right)


@pytest.mark.slow  # draws every chart of a month
def test_a_weekend_is_not_a_gap() -> None:
    returns, bench = window("2024-07-01", "2024-07-31")
    (line, *_) = data_lines(every_chart(returns, bench)["equity"])
    assert len(joined_spans(line)) == len(returns) - 1  # one unbroken line through every weekend


@pytest.mark.slow  # draws two charts of 402 sessions
def test_alert_markers_stay_apart_over_400_sessions() -> None:
    returns, bench = WINDOWS["400+ sessions"]
    days = returns.index
    # an alert every week, runs of alerts on consecutive days, a critical one inside a run of
    # warnings
    marks = [Mark(day, "alert", "drawdown", "warning") for day in days[::5]]
    marks += [Mark(day, "alert", "daily_loss", "warning") for day in days[100:112]]
    marks += [Mark(days[105], "alert", "daily_loss", "critical")]
    marks += [Mark(day, "repair", "failed") for day in [*days[200:204], *days[300:302]]]
    for draw in (charts.draw_equity, charts.draw_rolling_ir):
        fig = drawn(lambda ax, draw=draw: draw(ax, returns, bench, marks=marks))  # type: ignore[misc]
        ax = fig.axes[0]
        for marker in ("^", "D"):
            centres = sorted(
                ax.transData.transform((mdates.date2num(x), 0))[0]
                for line in ax.lines
                if line.get_marker() == marker
                for x in line.get_xdata()
            )
            size_px = (7 if marker == "^" else 6) * fig.dpi / 72
            gaps = np.diff(centres)
            assert len(centres) > 1 and gaps.min() >= size_px, (
                draw.__name__,
                marker,
                gaps.min(),
                size_px,
            )
        counts = sum(int(t.get_text()) for t in ax.texts if t.get_text().isdigit())
        singles = sum(1 for line in ax.lines if line.get_marker() in ("^", "D")) - sum(
            1 for t in ax.texts if t.get_text().isdigit()
        )
        # Every mark is counted by the marker that stands for it
        assert counts + singles == len(marks)
        critical = [
            line
            for line in ax.lines
            if line.get_marker() == "^" and line.get_color() == charts.ALERT_COLORS["critical"]
        ]
        assert len(critical) == 1  # the run of warnings around it is drawn in its colour


@pytest.mark.slow  # writes two reports
def test_a_short_window_shows_no_annualized_figure_and_says_why(tmp_path: Path) -> None:
    returns, bench = WINDOWS["8 sessions over a holiday"]
    report = build_report(
        returns,
        tmp_path / "short",
        benchmark=bench,
        title="Paper",
        phases=[Phase("v1 daily_momentum", returns.index[0], returns.index[-1])],
    )
    assert report.metrics["trading_days"] == 8 < MIN_ANNUALIZED_SESSIONS
    for key in (
        "annualized_return",
        "cagr",
        "sharpe",
        "information_ratio",
        "alpha_annualized",
        "volatility",
    ):
        assert report.metrics[key] is None, key
        assert report.benchmark_metrics is not None and report.benchmark_metrics.get(key) is None, (
            key
        )
    assert report.metrics["cumulative_return"] == pytest.approx(float((1 + returns).prod() - 1))
    assert report.phases is not None and report.phases["annualized_return"].isna().all()
    assert report.caveats and "fewer than 60: too short to annualize" in report.caveats[0]
    summary, page = report.markdown.read_text(), report.html.read_text()
    assert (
        "| Annualized return (% a year) | — | — |" in summary
        and "Too short to annualize" in summary
    )
    assert 'class="caveat"' in page and "too short to annualize" in page
    long = build_report(
        *WINDOWS["400+ sessions"][:1], tmp_path / "long", benchmark=WINDOWS["400+ sessions"][1]
    )
    assert long.metrics["annualized_return"] is not None and long.caveats == []
