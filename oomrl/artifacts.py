"""What the Prefect artifacts of a run say: rounded numbers, version labels, charts.

The numbers carry units. The charts are ones the Prefect UI can load. This is pure text and rows;
the tasks only hand them to Prefect.

Charts are linked over HTTP through the webhook's signed /reports route when the stack has one
(`ReportLinks`). Without it they are embedded as data URIs. The UI's markdown and image artifacts
render those too. A `file://` link is never published: browsers refuse to open them from a page.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from oomrl.metrics import report_tables as rt
from oomrl.metrics.labels import format_value, label
from oomrl.metrics.tearsheet_md import grid_markdown
from oomrl.report_links import ReportLinks

if TYPE_CHECKING:
    from oomrl.metrics.report import Report


@dataclass(frozen=True)
class ReportArtifacts:
    """The report's artifacts: a markdown summary, a metrics table, the tearsheet link, one
    image."""

    markdown: str
    metrics_rows: list[dict[str, str]]
    tearsheet_url: str | None
    image_url: str
    image_description: str


def data_uri(path: Path) -> str:
    """A PNG as a data URI (the fallback when no HTTP route serves the report)."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def image_link(path: Path, links: ReportLinks | None) -> str:
    """A chart's URL: signed over HTTP when the stack serves reports.

    Else it is the PNG as a data URI.
    """
    return links.url(path) if links is not None else data_uri(path)


def _chart(report: Report, stem: str) -> Path | None:
    return next((p for p in report.pngs if p.stem == stem), None)


def report_artifacts(report: Report, links: ReportLinks | None) -> ReportArtifacts:
    """The artifacts of an account report; `links` None embeds the images."""

    def image(path: Path) -> str:
        return image_link(path, links)

    tearsheet_url = links.url(report.html) if links is not None else None
    where = (
        f"**[Open the full tearsheet]({tearsheet_url})** (monthly returns, drawdown "
        "periods, friction "
        "month by month, style attribution, glossary)"
        if tearsheet_url
        else f"The full tearsheet is `{report.html}` on the worker (set OOMRL_REPORTS_URL, as "
        "`oomrl server up` does, to open it from here)."
    )
    lines = [
        f"# {report.title}: {report.span}",
        "",
        f"Benchmark: {report.benchmark_label}. {where}",
        "",
        *[f"> **Too short to annualize.** {text}\n" for text in report.caveats],
    ]
    figures = rt.key_figures(
        report.metrics,
        report.benchmark_metrics,
        "CSI 300" if report.benchmark_metrics is not None else "",
    )
    lines += ["## Key figures", "", grid_markdown(figures), ""]
    for stem, title in (
        ("equity", "Cumulative return, with alerts, repairs and promotions"),
        ("rolling_ir", "Rolling 60-day information ratio"),
    ):
        chart = _chart(report, stem)
        if chart is not None:
            lines += [f"## {title}", "", f"![{stem}]({image(chart)})", ""]
    if report.phases is not None:
        lines += [
            "## Per strategy version",
            "",
            grid_markdown(rt.transposed(report.phases, "phase", rt.PHASE_ROWS)),
            "",
        ]
    if report.friction is not None:
        friction = rt.transposed(report.friction.by_version, "version", rt.FRICTION_ROWS, span=None)
        lines += ["## Friction", "", grid_markdown(friction), ""]
        chart = _chart(report, "friction")
        if chart is not None:
            lines += [f"![friction]({image(chart)})", ""]
    alphas = rt.two_alphas(report.metrics, report.attribution)
    if alphas is not None:
        lines += ["## Two alphas", "", grid_markdown(alphas), "", rt.TWO_ALPHAS_NOTE, ""]
    equity = _chart(report, "equity") or report.pngs[0]
    return ReportArtifacts(
        markdown="\n".join(lines),
        metrics_rows=metric_rows(report.metrics, report.benchmark_metrics),
        tearsheet_url=tearsheet_url,
        image_url=image(equity),
        image_description=f"{report.title}: cumulative return vs the CSI 300, with alerts, "
        "repairs and "
        "promotions",
    )


def metric_rows(
    metrics: Mapping[str, Any], benchmark: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """One row per metric: its label with unit, the portfolio's value, the CSI 300's.

    The definitions are in the tearsheet's glossary. The Prefect UI never wraps a table cell. A
    sentence per row would push the values out of a laptop's window.
    """
    rows = []
    for key, value in metrics.items():
        row = {"metric": label(key).heading, "portfolio": format_value(key, value)}
        if benchmark is not None:
            row["CSI 300"] = format_value(key, benchmark[key]) if key in benchmark else ""
        rows.append(row)
    return rows


# -- rebalance artifacts ---------------------------------------------------------------------------
FILL_COLUMNS = (
    ("symbol", "symbol", None),
    ("side", "side", None),
    ("quantity", "shares", "{:,.0f}"),
    ("price", "price (CNY)", "{:,.2f}"),
    ("frictionless_price", "frictionless price (CNY)", "{:,.2f}"),
    ("commission", "commission (CNY)", "{:,.2f}"),
    ("stamp_duty", "stamp duty (CNY)", "{:,.2f}"),
    ("transfer_fee", "transfer fee (CNY)", "{:,.2f}"),
    ("impact_cost", "impact (CNY)", "{:,.2f}"),
    ("adv_participation", "ADV participation (%)", "pct3"),
)
ORDER_COLUMNS = (
    ("symbol", "symbol", None),
    ("side", "side", None),
    ("requested", "requested (shares)", "{:,.0f}"),
    ("filled", "filled (shares)", "{:,.0f}"),
    ("unfilled", "unfilled (shares)", "{:,.0f}"),
    ("reason", "reason", None),
)
REPLAY_COLUMNS = (
    ("strategy", "strategy", None),
    ("start", "from", None),
    ("end", "to", None),
    ("trading_days", "sessions", "{:,.0f}"),
    ("rebalances", "rebalances", "{:,.0f}"),
    ("turnover_annualized", "turnover (× NAV a year)", "{:.2f}"),
    ("total_costs", "costs (CNY)", "{:,.0f}"),
    ("costs_fraction", "costs (% of capital)", "pct2"),
    ("slippage_leakage", "slippage leakage (%)", "pct2"),
    ("frictionless_return", "frictionless return (%)", "pct2"),
    ("net_return", "net return (%)", "pct2"),
    ("dividends", "dividends (CNY)", "{:,.0f}"),
    # fills priced from a known adjustment factor (the rest: the nearest known factor)
    ("raw_prices_known", "raw prices known (%)", "pct0"),
    ("halted_on", "halted on", None),
)
# principal loss = 1 − NAV / initial capital. It is shown as a loss (0 on a gain).
# The gain is in its own column.
NAV_COLUMNS = (
    ("date", "date", "date"),
    ("nav", "NAV (CNY)", "{:,.2f}"),
    ("cash", "cash (CNY)", "{:,.2f}"),
    ("market_value", "market value (CNY)", "{:,.2f}"),
    ("realized_return", "realized return (%)", "pct3"),
    ("frictionless_return", "frictionless return (%)", "pct3"),
    ("slippage_leakage", "slippage leakage (%)", "pct3"),
    ("turnover", "turnover (× NAV)", "{:.3f}"),
    ("costs", "costs (CNY)", "{:,.2f}"),
    ("reward", "reward (Eq. 1-2)", "{:.5f}"),
    ("principal_loss", "principal loss (%)", "loss2"),
    ("principal_loss", "vs initial capital (%)", "gain2"),
)


def cell_text(value: Any, style: str | None) -> str:
    """One value as shown, rounded by `style`; — for none.

    `style` is a format, `pctN`, `lossN`, `gainN` with an optional unit after a space, `date`, or
    `short`.
    """
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    if style == "short":
        return str(value)[:12]
    if style == "date":
        return f"{pd.Timestamp(value):%Y-%m-%d}"
    if style is None or isinstance(value, str):
        return str(value)
    kind, _, unit = style.partition(" ")  # "pct2 of NAV": two decimals, then the unit
    after = f" {unit}" if unit else ""
    if kind.startswith("pct"):
        return f"{float(value) * 100:.{kind[3:]}f} %{after}"
    if kind.startswith("loss"):  # a principal loss: never negative (a gain is no loss)
        return f"{max(float(value), 0.0) * 100:.{kind[4:]}f} %{after}"
    # NAV / initial capital − 1, from the principal loss L = 1 − NAV / W₀
    if kind.startswith("gain"):
        return f"{-float(value) * 100:+.{kind[4:]}f} %{after}"
    return style.format(float(value))


Columns = tuple[tuple[str, str, str | None], ...]


def formatted_rows(rows: Iterable[Mapping[str, Any]], columns: Columns) -> list[dict[str, str]]:
    """Rows with renamed columns (units in the names) and rounded values, in the columns' order."""
    return [
        {title: cell_text(row.get(key), style) for key, title, style in columns if key in row}
        for row in rows
    ]


def numeric_titles(columns: Columns) -> set[str]:
    """The titles of the columns that hold numbers (right-aligned wherever they are shown)."""
    return {title for _, title, style in columns if style not in (None, "date", "short")}


def markdown_table(rows: list[dict[str, str]], numeric: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """Formatted rows as a pipe table, numbers right-aligned."""
    if not rows:
        return ""
    titles = list(rows[0])
    rule = "|" + "|".join("---:" if title in numeric else ":---" for title in titles) + "|"
    lines = ["| " + " | ".join(titles) + " |", rule]
    return "\n".join(lines + ["| " + " | ".join(row[t] for t in titles) + " |" for row in rows])


def nav_rows(nav: pd.DataFrame) -> list[dict[str, str]]:
    """NAV rows with units, dates as dates, fractions as labelled percentages."""
    return formatted_rows(nav.to_dict("records"), NAV_COLUMNS)


def fills_rows(fills: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    return formatted_rows(fills, FILL_COLUMNS)


def orders_rows(orders: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    return formatted_rows(orders, ORDER_COLUMNS)


def replay_rows(summaries: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    return formatted_rows(summaries, REPLAY_COLUMNS)


def nav_markdown(summary: Mapping[str, Any], nav: pd.DataFrame, version_label: str) -> str:
    """The account's recent NAV with the sim-to-real gap, under the version's name."""
    status = (
        f"Strategy version **{version_label}**; committed: {summary['committed']}, "
        f"duplicate: {summary['duplicate']}, halted: {summary['halted']}."
    )
    table = markdown_table(
        nav_rows(nav.drop(columns=["cash", "market_value", "reward"], errors="ignore")),
        numeric_titles(NAV_COLUMNS),
    )
    return "\n".join([f"# {summary['account']} on {summary['as_of']}", "", status, "", table])
