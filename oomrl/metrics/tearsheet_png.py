"""tearsheet.png: the report on one page (headline figures, charts with marks, per-version table).

It is for a README, a chat message or a Prefect image artifact."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from matplotlib.figure import Figure

from oomrl.metrics import charts
from oomrl.metrics import report_tables as rt
from oomrl.metrics.labels import format_value
from oomrl.metrics.performance import ROLLING_IR_WINDOW, Phase

if TYPE_CHECKING:
    from oomrl.metrics.report import Report

WIDTH_IN = 14.0
DPI = 100
HEADLINE = (
    ("cumulative_return", "Return over the window"),
    ("annualized_return", "Ann. return"),
    ("max_drawdown", "Max drawdown"),
    ("sharpe", "Sharpe"),
    ("information_ratio", "IR vs CSI 300"),
    ("beta", "Beta"),
    ("alpha_annualized", "CAPM alpha"),
)
PER_ROW = 7
CAVEAT_WIDTH = 170  # characters a line of the short-window caveat holds at 9.5 pt across the page.
# Each friction figure summed and a year. A version too short to annualize keeps its sums.
FRICTION_ROWS = (
    "turnover",
    "turnover_annualized",
    "costs_total",
    "cost_drag",
    "slippage_leakage",
    "slippage_leakage_annualized",
    "adv_participation_mean",
)
FRICTION_HEADLINE = (
    ("turnover_annualized", "Turnover a year"),
    ("cost_drag", "Cost drag a year"),
    ("slippage_leakage_annualized", "Slippage leakage a year"),
    ("adv_participation_mean", "Mean ADV participation"),
)


def _headline(report: Report) -> list[tuple[str, str]]:
    figures = [
        (name, format_value(key, report.metrics[key]))
        for key, name in HEADLINE
        if key in report.metrics
    ]
    if report.attribution is not None:
        figures.append(
            (
                "Pure alpha",
                format_value("alpha_annualized", report.attribution.decomposition["alpha"]),
            )
        )
    if report.friction is not None:
        whole = report.friction.by_version.iloc[-1]
        figures += [(name, format_value(key, whole[key])) for key, name in FRICTION_HEADLINE]
    return figures


def _version_table(report: Report) -> rt.Grid | None:
    """Per version: performance, then the friction that explains it (same columns, same order)."""
    if report.phases is None:
        return None
    table = rt.transposed(report.phases, "phase", rt.PHASE_ROWS)
    if report.friction is not None:
        names = list(report.phases["phase"])
        by_version = report.friction.by_version.set_index("version")
        if set(names) <= set(by_version.index):
            rows = by_version.loc[names].reset_index()
            table.rows += rt.transposed(rows, "version", FRICTION_ROWS, span=None).rows
    return table


def _table(ax: object, grid: rt.Grid) -> None:
    ax.axis("off")  # type: ignore[attr-defined]
    cells = [[c.text for c in row] for row in grid.rows]
    table = ax.table(  # type: ignore[attr-defined]
        cellText=cells,
        colLabels=[c.text for c in grid.header],
        loc="upper left",
        cellLoc="right",
        colLoc="center",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1.0, 1.25)
    for (row, column), cell in table.get_celld().items():
        cell.set_edgecolor("#dde2e8")
        if row == 0:
            cell.set_facecolor("#f3f6fa")
        if column == 0:
            cell.set_text_props(ha="left")
    table.auto_set_column_width(list(range(len(grid.header))))


def summary_png(
    returns: pd.Series,
    benchmark: pd.Series | None,
    report: Report,
    path: Path,
    benchmark_label: str = "CSI 300",
    phases: list[Phase] | None = None,
) -> Path:
    """Draw the page and write it to `path`."""
    panels = ["equity"] + (
        ["rolling_ir"] if benchmark is not None and len(returns) > ROLLING_IR_WINDOW else []
    )
    panels += ["underwater"] + (["friction"] if report.friction is not None else [])
    table = _version_table(report)
    figures = _headline(report)
    rows = [figures[i : i + PER_ROW] for i in range(0, len(figures), PER_ROW)]
    caveat = "\n".join(textwrap.wrap(" ".join(report.caveats), CAVEAT_WIDTH))
    caveat_in = 0.2 * (caveat.count("\n") + 1) + 0.1 if caveat else 0.0
    head_in = 0.8 + caveat_in + 0.6 * len(rows)
    heights = [3.0 if p == "equity" else 2.2 for p in panels] + (
        [0.3 * (len(table.rows) + 2)] if table else []
    )
    fig = Figure(figsize=(WIDTH_IN, head_in + sum(heights)), dpi=DPI, layout="constrained")
    head, body = fig.subfigures(2, 1, height_ratios=[head_in, sum(heights)])  # type: ignore[misc]  # 2 rows: an array
    to_fraction = 1.0 / head_in  # inches -> head subfigure fraction
    head.text(
        0.01,
        1 - 0.15 * to_fraction,
        f"{report.title} — oomrl tearsheet",
        fontsize=17,
        weight="bold",
        va="top",
    )
    head.text(
        0.01,
        1 - 0.5 * to_fraction,
        f"{report.span} · {report.metrics['trading_days']} sessions · "
        f"benchmark {report.benchmark_label}",
        fontsize=10.5,
        color="#4f5b66",
        va="top",
    )
    if caveat:
        head.text(0.01, 1 - 0.8 * to_fraction, caveat, fontsize=9.5, color="#a04000", va="top")
    for number, row in enumerate(rows):
        y = (0.05 + 0.6 * (len(rows) - 1 - number)) * to_fraction
        for column, (name, value) in enumerate(row):
            x = 0.01 + column * 0.98 / PER_ROW
            head.text(x, y + 0.2 * to_fraction, value, fontsize=13, weight="bold", va="bottom")
            head.text(x, y, name, fontsize=9, color="#4f5b66", va="bottom")
    axes = body.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights})
    # The last axes is the version table's when there is one. It has no panel of its own.
    for ax, panel in zip(axes, panels, strict=False):
        if panel == "equity":
            charts.draw_equity(
                ax, returns, benchmark, report.title, benchmark_label, phases, report.marks
            )
        elif panel == "rolling_ir":
            charts.draw_rolling_ir(
                ax, returns, benchmark, phases, benchmark_label=benchmark_label, marks=report.marks
            )
        elif panel == "underwater":
            charts.draw_underwater(ax, returns, report.title)
        else:
            charts.draw_friction(ax, report.friction.by_month, report.marks)  # type: ignore[union-attr]
    if table is not None:
        _table(axes[-1], table)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
