"""The report: computes every table, draws the charts, writes them into one folder.

It writes tearsheet.html (images inlined), tearsheet.png (one page) and summary.md."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from oomrl.metrics import charts
from oomrl.metrics.factors import StyleAttribution
from oomrl.metrics.friction import Friction, friction_is_empty
from oomrl.metrics.labels import format_value
from oomrl.metrics.marks import Mark, within
from oomrl.metrics.performance import (
    ROLLING_IR_WINDOW,
    Phase,
    compute_metrics,
    phase_table,
    standalone_metrics,
)
from oomrl.metrics.periods import drawdown_periods, monthly_returns, yearly_returns
from oomrl.metrics.report import Report, ReportInputs
from oomrl.metrics.short_window import (
    MIN_ANNUALIZED_SESSIONS,
    caveat,
    rows_without_annualized,
    short_windows,
    without_annualized,
)

__all__ = ["BENCHMARK_LABELS", "build_report", "format_value"]

BENCHMARK_LABELS = {
    "price": "CSI 300 price index (000300)",
    "total_return": "CSI 300 total-return index (H00300)",
}
DRAWDOWNS_SHOWN = 5


def build_report(
    returns: pd.Series,
    out_dir: Path,
    *,
    benchmark: pd.Series | None = None,
    benchmark_kind: str = "price",
    phases: list[Phase] | None = None,
    title: str = "Portfolio",
    rf: float = 0.0,
    attribution: StyleAttribution | None = None,
    notes: list[str] | None = None,
    friction: Friction | None = None,
    marks: list[Mark] | None = None,
) -> Report:
    """Write the charts, tearsheet.html, tearsheet.png and summary.md into out_dir; return the
    Report."""
    inputs = ReportInputs(
        title,
        benchmark_kind,
        rf,
        phases,
        attribution,
        friction,
        list(marks or []),
        list(notes or []),
    )
    return write_report(returns, benchmark, out_dir, inputs)


def write_report(
    returns: pd.Series, benchmark: pd.Series | None, out_dir: Path, inputs: ReportInputs
) -> Report:
    """The work of build_report, on one ReportInputs."""
    from oomrl.metrics.tearsheet_html import render_html
    from oomrl.metrics.tearsheet_md import render_markdown
    from oomrl.metrics.tearsheet_png import summary_png

    if benchmark is not None and inputs.benchmark_kind not in BENCHMARK_LABELS:
        raise ValueError(
            f"benchmark kind must be one of {sorted(BENCHMARK_LABELS)}, "
            f"got {inputs.benchmark_kind!r}"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    if benchmark is not None:
        benchmark = benchmark.loc[returns.index.intersection(benchmark.index)]
    report = _tables(returns, benchmark, out_dir, inputs)
    report.pngs = _charts(returns, benchmark, out_dir, report, inputs)
    report.summary_png = summary_png(
        returns,
        benchmark,
        report,
        out_dir / "tearsheet.png",
        _short_benchmark(inputs.benchmark_kind),
        inputs.phases,
    )
    report.markdown.write_text(render_markdown(report))
    report.html.write_text(render_html(report))
    return report


def _short_benchmark(kind: str) -> str:
    return "CSI 300" + (" TR" if kind == "total_return" else "")


def _tables(
    returns: pd.Series, benchmark: pd.Series | None, out_dir: Path, inputs: ReportInputs
) -> Report:
    rf, sessions = inputs.rf, len(returns)
    if benchmark is not None:
        metrics = compute_metrics(returns, benchmark, rf=rf)
        benchmark = benchmark.loc[returns.index]
        bench_metrics: dict[str, float | int | None] | None = cumulative(
            benchmark
        ) | standalone_metrics(benchmark, rf=rf)
    else:
        metrics, bench_metrics = standalone_metrics(returns, rf=rf), None
    metrics = without_annualized(cumulative(returns) | metrics, sessions)
    bench_metrics = (
        without_annualized(bench_metrics, sessions) if bench_metrics is not None else None
    )
    friction = (
        inputs.friction
        if inputs.friction is not None and not friction_is_empty(inputs.friction)
        else None
    )
    if friction is not None:
        friction = Friction(rows_without_annualized(friction.by_version), friction.by_month)
    phases = (
        rows_without_annualized(phase_table(returns, inputs.phases, benchmark, rf))
        if inputs.phases
        else None
    )
    notes = list(inputs.notes)
    if benchmark is not None and len(returns) <= ROLLING_IR_WINDOW:
        notes.append(f"No rolling {ROLLING_IR_WINDOW}-day IR chart: only {len(returns)} sessions.")
    attribution = inputs.attribution
    return Report(
        html=out_dir / "tearsheet.html",
        markdown=out_dir / "summary.md",
        pngs=[],
        metrics=metrics,
        benchmark_metrics=bench_metrics,
        phases=phases,
        style=attribution.table() if attribution is not None else None,
        style_split=attribution.split_table() if attribution is not None else None,
        attribution=attribution,
        monthly=monthly_returns(returns),
        yearly=yearly_returns(returns, benchmark),
        drawdowns=drawdown_periods(returns, DRAWDOWNS_SHOWN),
        friction=friction,
        marks=within(inputs.marks, returns.index[0], returns.index[-1]),
        notes=notes,
        caveats=report_caveats(sessions, phases),
        title=inputs.title,
        benchmark_label=BENCHMARK_LABELS[inputs.benchmark_kind]
        if benchmark is not None
        else "none",
        span=f"{returns.index[0].date()} .. {returns.index[-1].date()}",
        rf=rf,
    )


def cumulative(returns: pd.Series) -> dict[str, float | int | None]:
    """The return over the whole window.

    It is the headline figure a window too short to annualize keeps."""
    return {"cumulative_return": float((1.0 + returns).prod() - 1.0)}


def report_caveats(sessions: int, phases: pd.DataFrame | None) -> list[str]:
    """The whole window's short-window caveat, or one naming the versions too short to annualize."""
    whole = caveat(sessions, "The report's window")
    if whole is not None:
        return [whole]
    short = short_windows(phases, "phase") if phases is not None else []
    if not short:
        return []
    return [
        f"{', '.join(short)}: fewer than {MIN_ANNUALIZED_SESSIONS} sessions, too short to "
        "annualize; "
        "its annualized figures are left out (—), its cumulative ones are shown."
    ]


def _charts(
    returns: pd.Series,
    benchmark: pd.Series | None,
    out_dir: Path,
    report: Report,
    inputs: ReportInputs,
) -> list[Path]:
    short = _short_benchmark(inputs.benchmark_kind)
    marks = report.marks
    pngs = [
        charts.equity_chart(
            returns, benchmark, out_dir / "equity.png", inputs.title, short, inputs.phases, marks
        ),
        charts.underwater_chart(returns, out_dir / "underwater.png", inputs.title),
    ]
    if benchmark is not None and len(returns) > ROLLING_IR_WINDOW:
        pngs.append(
            charts.rolling_ir_chart(
                returns,
                benchmark,
                out_dir / "rolling_ir.png",
                inputs.phases,
                benchmark_label=short,
                marks=marks,
            )
        )
    if report.friction is not None:
        pngs.append(
            charts.friction_chart(report.friction.by_month, out_dir / "friction.png", marks)
        )
    return pngs
