"""summary.md: the tearsheet as GitHub-flavoured Markdown (tables with units, glossary, chart
links)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oomrl.metrics import report_tables as rt
from oomrl.metrics.labels import label
from oomrl.metrics.marks import marks_table

if TYPE_CHECKING:
    from oomrl.metrics.report import Report


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def grid_markdown(grid: rt.Grid) -> str:
    """A Grid as a pipe table: text columns left-aligned, numbers right-aligned."""
    header = "| " + " | ".join(_escape(c.text) for c in grid.header) + " |"
    rule = "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(grid.header))) + "|"
    rows = ["| " + " | ".join(_escape(c.text) for c in row) + " |" for row in grid.rows]
    return "\n".join([header, rule, *rows])


def glossary_markdown(keys: set[str]) -> str:
    entries = sorted(
        {label(k).heading: label(k).definition for k in keys if label(k).definition}.items()
    )
    return "\n".join(
        [
            "| term | meaning |",
            "|:---|:---|",
            *[f"| {_escape(n)} | {_escape(d)} |" for n, d in entries],
        ]
    )


def render_markdown(report: Report, image_links: dict[str, str] | None = None) -> str:
    """The summary; `image_links` maps a chart's file name to the URL to show (default: the file
    name)."""
    links = image_links or {}
    bench = "CSI 300" if report.benchmark_metrics is not None else ""
    figures = rt.key_figures(report.metrics, report.benchmark_metrics, bench)
    used = set(figures.keys)
    lines = [
        f"# {report.title}: performance report",
        "",
        f"- Period: {report.span} ({report.metrics['trading_days']} sessions)",
        f"- Benchmark: {report.benchmark_label}",
        f"- Risk-free rate: {report.rf:.2%} a year",
        "- Conventions: annualized return = mean daily return × 252; CAGR alongside; std ddof=1.",
        "",
        *[f"> **Too short to annualize.** {text}\n" for text in report.caveats],
        "## Key figures",
        "",
        grid_markdown(figures),
    ]
    if report.phases is not None:
        grid = rt.transposed(report.phases, "phase", rt.PHASE_ROWS)
        used |= grid.keys
        lines += ["", "## Per strategy version", "", grid_markdown(grid)]
    if report.friction is not None:
        grid = rt.transposed(report.friction.by_version, "version", rt.FRICTION_ROWS, span=None)
        monthly = rt.plain(report.friction.by_month, row_headers=True)
        used |= grid.keys | monthly.keys
        lines += [
            "",
            "## Friction",
            "",
            grid_markdown(grid),
            "",
            "### Month by month",
            "",
            grid_markdown(monthly),
        ]
    if report.monthly is not None and report.yearly is not None:
        yearly = rt.plain(report.yearly, row_headers=True)
        used |= yearly.keys
        lines += [
            "",
            "## Monthly returns",
            "",
            grid_markdown(rt.monthly(report.monthly)),
            "",
            "## Yearly returns",
            "",
            grid_markdown(yearly),
        ]
    if report.drawdowns is not None and len(report.drawdowns):
        grid = rt.plain(report.drawdowns, row_headers=True)
        used |= grid.keys
        lines += ["", "## Worst drawdown periods", "", grid_markdown(grid)]
    alphas = rt.two_alphas(report.metrics, report.attribution)
    if alphas is not None:
        lines += ["", "## Two alphas", "", grid_markdown(alphas), "", rt.TWO_ALPHAS_NOTE]
    if report.style is not None and report.style_split is not None:
        style, split = rt.plain(report.style.reset_index()), rt.plain(report.style_split)
        used |= style.keys | split.keys
        lines += ["", "## Style attribution", "", grid_markdown(style), "", grid_markdown(split)]
    if report.marks:
        lines += [
            "",
            "## Alerts, repairs and promotions",
            "",
            grid_markdown(rt.plain(marks_table(report.marks))),
        ]
    if report.notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in report.notes]]
    charts = [p for p in ([report.summary_png] if report.summary_png else []) + report.pngs]
    lines += ["", "## Charts", ""] + [f"![{p.stem}]({links.get(p.name, p.name)})" for p in charts]
    lines += ["", "## Glossary", "", glossary_markdown(used)]
    return "\n".join(lines) + "\n"
