"""tearsheet.html: one self-contained page that fits a 1280-px laptop screen.

Images are inlined; no script, no network. Every label carries its definition on hover and in the
glossary."""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from oomrl.metrics import report_tables as rt
from oomrl.metrics.labels import label
from oomrl.metrics.marks import marks_table

if TYPE_CHECKING:
    from oomrl.metrics.report import Report

CSS = """
*{box-sizing:border-box}
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5rem auto;
max-width:1120px;padding:0 1rem;color:#1d2733;line-height:1.4}
h1{font-size:1.6rem;margin:0 0 .2rem}
h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d5dbe3}
h3{font-size:1rem;margin:1.2rem 0 .3rem}
.meta{color:#4f5b66;font-size:.9rem} .note{color:#4f5b66;font-size:.88rem;max-width:60rem}
.caveat{background:#fff4e0;border-left:4px solid #e67e22;padding:.4rem .7rem;max-width:60rem}
.chips span{display:inline-block;background:#eef3fa;border-radius:3px;padding:.05rem .45rem;
margin:.1rem .2rem 0 0;font-size:.85rem}
table{border-collapse:collapse;font-size:.86rem;margin:.4rem 0;max-width:100%}
th,td{border:1px solid #dde2e8;padding:.25rem .45rem;text-align:right}
th{background:#f3f6fa;font-weight:600;white-space:normal;vertical-align:bottom}
td{white-space:nowrap} td.text{white-space:normal;text-align:left}
tr>:first-child{text-align:left;white-space:normal}
[title]{text-decoration:underline dotted #9aa5b1;text-underline-offset:2px;cursor:help}
img{max-width:100%;height:auto;margin:.3rem 0;display:block}
details summary{cursor:pointer;color:#1f4e9c;margin:.4rem 0}
dl.glossary{display:grid;grid-template-columns:minmax(10rem,18rem) 1fr;gap:.2rem 1rem;
font-size:.86rem}
dl.glossary dt{font-weight:600} dl.glossary dd{margin:0}
"""


def _cell(tag: str, cell: rt.Cell, extra_class: str = "") -> str:
    attrs = f' title="{html.escape(cell.hint)}"' if cell.hint else ""
    style = ""
    if cell.tone is not None:
        strength = min(abs(cell.tone), 1.0) * 0.55
        rgb = "30,132,73" if cell.tone >= 0 else "192,57,43"
        style = f' style="background:rgba({rgb},{strength:.2f})"'
    css = f' class="{extra_class}"' if extra_class else ""
    return f"<{tag}{attrs}{css}{style}>{html.escape(cell.text)}</{tag}>"


def grid_html(grid: rt.Grid) -> str:
    """A Grid as an HTML table. The first column is a row header when the grid says so."""
    head = "".join(_cell("th", cell) for cell in grid.header)
    body = []
    for row in grid.rows:
        first = _cell("th", row[0]) if grid.row_headers else _cell("td", row[0])
        body.append("<tr>" + first + "".join(_cell("td", c) for c in row[1:]) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _image(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}"></figure>'


def _chart(report: Report, stem: str, caption: str) -> str:
    found = [p for p in report.pngs if p.stem == stem]
    return _image(found[0], caption) if found else ""


def _sections(report: Report) -> list[tuple[str, str, set[str]]]:
    """(heading, html, glossary keys) of each section, in reading order."""
    bench = "CSI 300" if report.benchmark_metrics is not None else ""
    out: list[tuple[str, str, set[str]]] = []
    figures = rt.key_figures(report.metrics, report.benchmark_metrics, bench)
    charts = (
        _chart(report, "equity", "Cumulative return")
        + _chart(report, "rolling_ir", "Rolling IR")
        + _chart(report, "underwater", "Drawdown")
    )
    out.append(("Key figures", grid_html(figures), figures.keys))
    out.append(("Equity, rolling information ratio and drawdown", _MARKS_NOTE + charts, set()))
    if report.phases is not None:
        grid = rt.transposed(report.phases, "phase", rt.PHASE_ROWS)
        out.append(("Per strategy version", grid_html(grid), grid.keys))
    if report.friction is not None:
        grid = rt.transposed(report.friction.by_version, "version", rt.FRICTION_ROWS, span=None)
        monthly = rt.plain(report.friction.by_month, row_headers=True)
        body = (
            f'<p class="note">{_FRICTION_NOTE}</p>{grid_html(grid)}'
            f'{_chart(report, "friction", "Friction")}'
            f"<details><summary>Friction month by month</summary>{grid_html(monthly)}</details>"
        )
        out.append(
            (
                "Friction: turnover, costs, slippage leakage, ADV participation",
                body,
                grid.keys | monthly.keys,
            )
        )
    if report.monthly is not None and report.yearly is not None:
        yearly = rt.plain(report.yearly, row_headers=True)
        body = (
            f"<h3>Monthly returns</h3>{grid_html(rt.monthly(report.monthly))}"
            f"<h3>Yearly returns</h3>{grid_html(yearly)}"
        )
        out.append(("Returns by month and year", body, yearly.keys | {"portfolio"}))
    if report.drawdowns is not None and len(report.drawdowns):
        grid = rt.plain(report.drawdowns, row_headers=True)
        out.append(
            (f"Worst drawdown periods (top {len(report.drawdowns)})", grid_html(grid), grid.keys)
        )
    alphas = rt.two_alphas(report.metrics, report.attribution)
    if alphas is not None:
        out.append(
            (
                "Two alphas, side by side",
                f'{grid_html(alphas)}<p class="note">{rt.TWO_ALPHAS_NOTE}</p>',
                alphas.keys,
            )
        )
    if report.style is not None and report.style_split is not None:
        style = rt.plain(report.style.reset_index(), row_headers=True)
        split = rt.plain(report.style_split, row_headers=True)
        body = f"{grid_html(style)}<h3>The annual return, split</h3>{grid_html(split)}"
        out.append(("Style attribution (market + High-Low factors)", body, style.keys | split.keys))
    if report.marks:
        events = rt.plain(marks_table(report.marks), row_headers=True)
        out.append(
            (
                f"Alerts, repairs and promotions ({len(report.marks)})",
                f"<details><summary>Show every event</summary>{grid_html(events)}</details>",
                set(),
            )
        )
    if report.notes:
        items = "".join(f"<li>{html.escape(note)}</li>" for note in report.notes)
        out.append(("Notes", f"<ul>{items}</ul>", set()))
    return out


_MARKS_NOTE = (
    '<p class="note">Shaded spans are strategy versions. ▲ loss alerts (orange: warning, red: '
    "critical) · ◆ a repair starts · dashed line: a new version trades from that session.</p>"
)
_FRICTION_NOTE = (
    "Every figure sums the ledger: turnover is value traded ÷ NAV; costs are commission, stamp "
    "duty, transfer fee and market impact in CNY; slippage leakage is the frictionless return "
    "minus the realized one (what friction took); ADV participation is a fill's share of the "
    "symbol's average daily volume."
)


def glossary_html(keys: set[str]) -> str:
    """The definitions of every label the page used, alphabetically."""
    entries = sorted(
        {label(k).heading: label(k).definition for k in keys if label(k).definition}.items()
    )
    items = "".join(
        f"<dt>{html.escape(name)}</dt><dd>{html.escape(text)}</dd>" for name, text in entries
    )
    return f'<dl class="glossary">{items}</dl>'


def render_html(report: Report) -> str:
    """The whole page."""
    sections = _sections(report)
    used: set[str] = set().union(*(keys for _, _, keys in sections))
    body = "".join(
        f"<section><h2>{html.escape(title)}</h2>{content}</section>"
        for title, content, _ in sections
    )
    versions = [str(p) for p in report.phases["phase"]] if report.phases is not None else []
    chips = (
        '<p class="chips">' + "".join(f"<span>{html.escape(v)}</span>" for v in versions) + "</p>"
        if versions
        else ""
    )
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    caveats = "".join(f'<p class="caveat">{html.escape(text)}</p>' for text in report.caveats)
    sessions = report.metrics["trading_days"]
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(report.title)} — oomrl "
        f"tearsheet</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(report.title)}</h1><p class=\"meta\">Period {report.span} · "
        f"{sessions} sessions · "
        f"Benchmark: <b>{html.escape(report.benchmark_label)}</b> · risk-free "
        f"{report.rf:.2%} a year · "
        "annualized return = mean daily return × 252 · generated "
        f"{created}</p>{caveats}{chips}{body}"
        f"<section><h2>Glossary</h2>{glossary_html(used)}</section></body></html>"
    )
