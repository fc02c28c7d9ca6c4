"""What a repair run shows a person: the approval form's text and the promotion evidence, rounded,
with units, in tables narrow enough for the Prefect UI (versions and windows as columns, named).

Pure text and rows; tasks/repair.py and tasks/review.py hand them to Prefect.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from oomrl.artifacts import Columns, cell_text, markdown_table
from oomrl.diagnostics.autopsy import Autopsy

if TYPE_CHECKING:
    from oomrl.agent.roles import Mandate
    from oomrl.crossval import CrossValidation, VersionMeasures
    from oomrl.diagnostics.autopsy import LossAlert

VERSIONS = ("candidate", "active", "baseline")
WINDOWS = ("alert", "long")
# The measures of one replay over one window, a row each (the columns are the versions); labels
# short enough that a row fits the Prefect UI, whose tables never wrap a cell (708 px of a 1280-px
# window).
MEASURE_ROWS: Columns = (
    ("sha", "commit", "short"),
    ("first", "from", "date"),
    ("last", "to", "date"),
    ("trading_days", "sessions", "{:,.0f}"),
    ("net_return", "net return (%)", "pct2"),
    ("information_ratio", "IR vs CSI 300", "{:.2f}"),
    ("reward", "reward Σ (Eq. 1-2)", "{:+.4f}"),
    ("max_drawdown", "max drawdown (%)", "pct2"),
    ("turnover", "turnover (× NAV)", "{:.2f}"),
    ("costs_fraction", "costs (% of capital)", "pct2"),
    ("rebalances", "rebalances", "{:,.0f}"),
    ("max_rebalances_per_period", "max rebalances a period", "{:,.0f}"),
    ("max_adv_participation", "max ADV part. (%)", "pct3"),
    ("max_weekly_turnover", "max weekly turnover (× NAV)", "{:.3f}"),
    ("max_position_weight", "max weight (% of NAV)", "pct2"),
    ("halted_on", "halted on", None),
)
# The autopsy's metrics as the form shows them: a short name, the unit with the value.
ALERT_METRICS: Columns = (
    ("daily_pnl", "daily P&L", "pct2 of NAV"),
    ("slippage_leakage", "slippage leakage", "pct2 of NAV"),
    ("drawdown", "drawdown", "pct2 from peak"),
    ("cumulative_principal_loss", "principal loss", "loss2 of initial capital"),
    ("turnover_annualized", "turnover", "{:.1f}× NAV a year"),
    ("rolling_ir_60d", "rolling 60-day IR", "{:.2f}"),
)
CONSTRAINTS: Columns = (
    ("rebalance", "rebalance", None),
    ("max_adv_participation", "max ADV participation", "pct1 of ADV"),
    ("max_weekly_turnover", "max weekly turnover", "pct1 of NAV"),
    ("max_position_weight", "max position weight", "pct1 of NAV"),
    ("max_drawdown", "max drawdown", "pct1"),
    ("min_information_ratio", "min information ratio", "{:.2f}"),
)
LONG_FLOAT = re.compile(r"-?\d+\.\d{4,}(?:e-?\d+)?")


def rounded_text(text: str) -> str:
    """Free text (a model's rationale) with every long float cut to four significant digits."""
    return LONG_FLOAT.sub(lambda m: f"{float(m.group(0)):.4g}", text)


def _measures(row: VersionMeasures) -> dict[str, Any]:
    values = row.model_dump(exclude={"dates", "returns"})
    return {
        **values,
        "first": row.dates[0] if row.dates else None,
        "last": row.dates[-1] if row.dates else None,
    }


def crossval_rows(cross: CrossValidation) -> list[dict[str, str]]:
    """The evidence as a table: a row per window and measure (each window's rows start with its
    dates), a column per version, so two `active` rows never look alike and the table stays
    narrow."""
    by = {(r.version, r.window): _measures(r) for r in cross.rows}
    versions = [v for v in VERSIONS if any(version == v for version, _ in by)]
    return [
        {
            "window": window,
            "measure": title,
            **{
                v: cell_text(by[(v, window)].get(key), style) if (v, window) in by else "—"
                for v in versions
            },
        }
        for window in WINDOWS
        if any(w == window for _, w in by)
        for key, title, style in MEASURE_ROWS
    ]


def crossval_markdown(cross: CrossValidation, image_url: str | None = None) -> str:
    """The decision: verdict, windows, tolerance, the evidence chart, the measures and every
    check."""
    verdict = "PROMOTE" if cross.passed else "REFUSE"
    lines = [
        f"# Cross-validation: {verdict}",
        "",
        f"- alert window: {cross.start} .. {cross.end}",
        f"- long window: {cross.long_start or cross.start} .. {cross.end}",
        (
            "- promotion rule, net of friction on the paired daily return difference "
            "(annualized): "
            f"{cross.rule.describe()}"
        ),
        "- ranking by total reward (Eq. 1-2) over the long window: "
        f"{', '.join(cross.ranking) or '—'}",
        "",
    ]
    if image_url:
        lines += [f"![Cumulative return of each version over the long window]({image_url})", ""]
    rows = crossval_rows(cross)
    lines += [
        "## Measures",
        "",
        markdown_table(rows, set(rows[0]) - {"window", "measure"}),
        "",
        "## Checks",
        "",
    ]
    # a list, not a table: a check's numbers are a sentence, and the UI's table cells never wrap
    lines += [
        f"- **{c.name}**: {'passed' if c.passed else 'FAILED'} — {c.detail}" for c in cross.checks
    ]
    return "\n".join(lines if cross.checks else [*lines, "(no check)"]) + "\n"


def not_measured_rows(reason: str) -> list[dict[str, str]]:
    """The cross-validation table of a repair whose replays could not be measured: what went
    wrong."""
    return [{"measure": "result", "value": "not measured"}, {"measure": "reason", "value": reason}]


def _superseded_lines(node_ids: list[str]) -> list[str]:
    """What the approval says about old tests: only those it names may be rewritten by the
    repair."""
    if not node_ids:
        return ["Supersedes no old test: the repair's tests may only add to the old ones.", ""]
    return [
        "Supersedes these old tests (the repair may rewrite them, judged as red tests; every "
        "other old test may only be added to):",
        "",
        *(f"- `{node_id}`" for node_id in node_ids),
        "",
    ]


def mandate_markdown(mandate: Mandate, autopsy: Autopsy | LossAlert | None, timeout_s: int) -> str:
    """The approval form's text: the proposed mandate, its constraints and the old tests it
    supersedes, the alert and its metrics,
    the Critic's reasons, all rounded with units; what an answer (or none) does."""
    constraints = {k: v for k, v in mandate.constraints.model_dump().items() if v is not None}
    full = autopsy if isinstance(autopsy, Autopsy) else None
    metrics = full.metrics.model_dump() if full else {}
    as_of = autopsy.as_of if autopsy is not None and autopsy.as_of else "?"
    alert = f"{full.trigger.rule} ({full.severity}) on {as_of}" if full else f"? (?) on {as_of}"
    known = {key for key, _, _ in ALERT_METRICS}
    extra: Columns = tuple(
        (key, key.replace("_", " "), "{:.4g}")
        for key in metrics
        if key not in known and isinstance(metrics[key], int | float)
    )
    shown = [
        {"metric": title, "value": cell_text(metrics[key], style)}
        for key, title, style in ALERT_METRICS + extra
        if key in metrics
    ]
    limits = [
        {"constraint": title, "proposed": cell_text(constraints[key], style)}
        for key, title, style in CONSTRAINTS
        if key in constraints
    ]
    numbers = {"value", "proposed"}
    hours = f" ({timeout_s / 3600:g} h)" if timeout_s >= 3600 else ""
    lines = [
        f"## Proposed mandate for `{mandate.module}`",
        "",
        mandate.text,
        "",
        markdown_table(limits, numbers) if limits else "No machine-checked constraint.",
        "",
        *_superseded_lines(mandate.supersedes),
        f"### The alert: {alert}",
        "",
        rounded_text(full.trigger.message if full else ""),
        "",
    ]
    if shown:
        lines += [markdown_table(shown, numbers), ""]
    lines += [
        f"Why: {rounded_text(mandate.rationale)}" if mandate.rationale else "",
        "",
        f"Approve, edit the fields, or reject; no answer within {timeout_s:,} s{hours} rejects.",
    ]
    return "\n".join(lines)
