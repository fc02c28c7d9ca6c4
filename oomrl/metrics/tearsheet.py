"""The report: PNG charts, one self-contained HTML tearsheet (images inlined) and a Markdown summary."""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from oomrl.metrics import charts
from oomrl.metrics.factors import StyleAttribution
from oomrl.metrics.performance import (
    ROLLING_IR_WINDOW,
    Phase,
    compute_metrics,
    phase_table,
    standalone_metrics,
)

BENCHMARK_LABELS = {
    "price": "CSI 300 price index (000300)",
    "total_return": "CSI 300 total-return index (H00300)",
}
PERCENT_KEYS = frozenset({
    "annualized_return", "cagr", "benchmark_annualized_return", "benchmark_cagr", "volatility",
    "max_drawdown", "tracking_error", "alpha_annualized", "excess_return", "cumulative_return",
    "annual_contribution", "beta_return", "style_return", "alpha", "risk_free", "annual",
})

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9rem} table{border-collapse:collapse;font-size:.9rem;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:right;white-space:nowrap} th{background:#f4f6fa}
.wide{overflow-x:auto} .wide th{white-space:normal}
td:first-child,th:first-child{text-align:left} img{max-width:100%;height:auto;margin:.5rem 0}
"""


def format_value(key: str, value: object) -> str:
    """Percent for return-like fractions, three decimals for ratios, '—' for undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if key in PERCENT_KEYS:
            return f"{value * 100:.2f} %"
        return f"{value:.5f}" if key == "coef" else f"{value:.3f}"  # daily coefficients are small
    return str(value)


def _formatted(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy().astype(object)
    for column in out.columns:
        out[column] = [format_value(str(column), v) for v in table[column].tolist()]
    return out


def _markdown_table(table: pd.DataFrame, index: bool = False) -> str:
    shown = _formatted(table)
    if index:
        shown = shown.reset_index()
    header = "| " + " | ".join(map(str, shown.columns)) + " |"
    rule = "|" + "|".join("---" for _ in shown.columns) + "|"
    rows = ["| " + " | ".join(map(str, row)) + " |" for row in shown.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


@dataclass
class Report:
    """Where the report went and what it says."""

    html: Path
    markdown: Path
    pngs: list[Path]
    metrics: dict[str, float | int | None]
    phases: pd.DataFrame | None = None
    style: pd.DataFrame | None = None
    style_split: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    def paths(self) -> list[Path]:
        return [self.html, self.markdown, *self.pngs]


def build_report(returns: pd.Series, out_dir: Path, *, benchmark: pd.Series | None = None,
                 benchmark_kind: str = "price", phases: list[Phase] | None = None,
                 title: str = "Portfolio", rf: float = 0.0,
                 attribution: StyleAttribution | None = None, notes: list[str] | None = None) -> Report:
    """Write the charts, tearsheet.html and summary.md into out_dir and return their paths."""
    if benchmark is not None and benchmark_kind not in BENCHMARK_LABELS:
        raise ValueError(f"benchmark kind must be one of {sorted(BENCHMARK_LABELS)}, got {benchmark_kind!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    bench_label = BENCHMARK_LABELS[benchmark_kind] if benchmark is not None else "none"
    short_bench = "CSI 300" + (" TR" if benchmark_kind == "total_return" else "")
    if benchmark is not None:
        metrics = compute_metrics(returns, benchmark, rf=rf)
        benchmark = benchmark.loc[returns.index]
    else:
        metrics = standalone_metrics(returns, rf=rf)
    pngs = [charts.equity_chart(returns, benchmark, out_dir / "equity.png", title, short_bench, phases),
            charts.underwater_chart(returns, out_dir / "underwater.png", title)]
    notes = list(notes or [])
    if benchmark is not None and len(returns) > ROLLING_IR_WINDOW:
        pngs.append(charts.rolling_ir_chart(returns, benchmark, out_dir / "rolling_ir.png", phases,
                                            benchmark_label=short_bench))
    elif benchmark is not None:
        notes.append(f"No rolling {ROLLING_IR_WINDOW}-day IR chart: only {len(returns)} sessions.")
    table = phase_table(returns, phases, benchmark, rf) if phases else None
    report = Report(html=out_dir / "tearsheet.html", markdown=out_dir / "summary.md", pngs=pngs,
                    metrics=metrics, phases=table, notes=notes,
                    style=attribution.table() if attribution is not None else None,
                    style_split=attribution.split_table() if attribution is not None else None)
    span = f"{returns.index[0].date()} .. {returns.index[-1].date()}"
    report.markdown.write_text(_markdown(report, title, bench_label, span, rf))
    report.html.write_text(_html(report, title, bench_label, span, rf))
    return report


def _markdown(report: Report, title: str, bench_label: str, span: str, rf: float) -> str:
    lines = [f"# {title}: performance report", "",
             f"- Period: {span} ({report.metrics['trading_days']} sessions)",
             f"- Benchmark: {bench_label}", f"- Risk-free rate: {rf:.2%} a year",
             "- Conventions: annualized return = mean daily return × 252; CAGR alongside; std ddof=1.", "",
             "## Metrics", "", _metrics_markdown(report.metrics)]
    if report.phases is not None:
        lines += ["", "## Phases", "", _markdown_table(report.phases)]
    if report.style is not None:
        lines += ["", "## Style attribution", "", _markdown_table(report.style, index=True)]
    if report.style_split is not None:
        lines += ["", _markdown_table(report.style_split)]
    if report.notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in report.notes]]
    lines += ["", "## Charts", ""] + [f"![{p.stem}]({p.name})" for p in report.pngs]
    return "\n".join(lines) + "\n"


def _metrics_markdown(metrics: dict[str, float | int | None]) -> str:
    rows = [f"| {key} | {format_value(key, value)} |" for key, value in metrics.items()]
    return "\n".join(["| metric | value |", "|---|---|", *rows])


def _html_table(table: pd.DataFrame) -> str:
    shown = _formatted(table).rename(columns=lambda c: str(c).replace("_", " "))
    return f'<div class="wide">{shown.to_html(index=False, border=0, escape=True)}</div>'


def _html(report: Report, title: str, bench_label: str, span: str, rf: float) -> str:
    metric_rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{format_value(k, v)}</td></tr>"
                          for k, v in report.metrics.items())
    images = "".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode("ascii")}"></figure>' for p in report.pngs)
    sections = [f"<h2>Metrics</h2><table><tr><th>metric</th><th>value</th></tr>{metric_rows}</table>"]
    if report.phases is not None:
        sections.append(f"<h2>Phases</h2>{_html_table(report.phases)}")
    if report.style is not None:
        style = _html_table(report.style.reset_index())
        sections.append(f"<h2>Style attribution (market + High-Low factors)</h2>{style}")
    if report.style_split is not None:
        sections.append(_html_table(report.style_split))
    if report.notes:
        items = "".join(f"<li>{html.escape(note)}</li>" for note in report.notes)
        sections.append(f"<h2>Notes</h2><ul>{items}</ul>")
    sections.append(f"<h2>Charts</h2>{images}")
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)} — oomrl report</title><style>{_CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"meta\">Period {span} · "
            f"{report.metrics['trading_days']} sessions · Benchmark: <b>{html.escape(bench_label)}</b> · "
            f"risk-free {rf:.2%} a year · annualized return = mean daily return × 252 · "
            f"generated {created}</p>{''.join(sections)}</body></html>")
