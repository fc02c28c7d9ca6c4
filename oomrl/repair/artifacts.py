"""What a repair run shows a person: the approval form's text and the promotion evidence.

Numbers are rounded, with units. Tables are narrow enough for the Prefect UI. Versions and windows
are named columns.

Pure text and rows; tasks/repair.py and orchestration/review.py hand them to Prefect.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from oomrl.artifacts import Columns, cell_text, markdown_table
from oomrl.diagnostics.autopsy import Autopsy

if TYPE_CHECKING:
    from oomrl.agent.roles import Mandate
    from oomrl.diagnostics.autopsy import LossAlert

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


def not_measured_rows(reason: str) -> list[dict[str, str]]:
    """The cross-validation table of a repair whose replays could not be measured: what went
    wrong."""
    return [{"measure": "result", "value": "not measured"}, {"measure": "reason", "value": reason}]


def _superseded_lines(node_ids: list[str]) -> list[str]:
    """What the approval says about old tests.

    Only those it names may be rewritten by the repair.
    """
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
    """The approval form's text, all rounded with units.

    It shows the proposed mandate, its constraints and the old tests it supersedes. It shows the
    alert and its metrics, and the Critic's reasons. It says what an answer (or none) does.
    """
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
