"""The Autopsy and the loss alert: the only repair inputs.

An Autopsy is a loss diagnosis with its mandate and machine-checkable constraints. These two models
are the only repair inputs any door accepts (CLI, flow, webhook). Every number is finite. Every
string and list is bounded. Names use the limits of oomrl.names.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from oomrl.names import ACCOUNT_MAX, ACCOUNT_PATTERN, ALERT_ID_MAX, ALERT_ID_PATTERN

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "autopsy.schema.json"
EVENT: Final = "FINANCIAL_DEGRADATION_DETECTED"

Severity = Literal["warning", "critical"]
Rebalance = Literal["daily", "weekly", "biweekly", "monthly"]
MODULE_PATTERN = r"^strategies\.[a-z_][a-z0-9_]*$"

AlertId = Annotated[str, Field(min_length=1, max_length=ALERT_ID_MAX, pattern=ALERT_ID_PATTERN)]
AccountName = Annotated[str, Field(min_length=1, max_length=ACCOUNT_MAX, pattern=ACCOUNT_PATTERN)]
ShortText = Annotated[str, Field(max_length=2_000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class AutopsyMetrics(_Strict):
    """The account's state on the alert date; fractions of NAV unless said otherwise."""

    daily_pnl: float = Field(description="Realized (net) return of the alert date.")
    slippage_leakage: float = Field(
        description="Frictionless minus realized return, summed over the window."
    )
    drawdown: float = Field(
        le=0, description="NAV over its high-water mark (starting capital included) − 1."
    )
    cumulative_principal_loss: float = Field(description="L = 1 − W/W₀.")
    turnover_annualized: float = Field(
        ge=0, description="Mean daily turnover over the window × 252."
    )
    rolling_ir_60d: float | None = Field(
        description="60-session information ratio vs the CSI 300; null "
        "when there is no benchmark or fewer than 60 sessions."
    )


class Trigger(_Strict):
    """Which rule fired, on what value, against which threshold."""

    rule: str = Field(min_length=1, max_length=64)
    value: float
    threshold: float
    window_start: date
    message: ShortText


class CostBreakdown(_Strict):
    """Execution costs over the evidence window, in CNY."""

    commission: float
    stamp_duty: float
    transfer_fee: float
    impact_cost: float
    total: float


class Evidence(_Strict):
    """What the ledger shows over the evidence window: fills, costs, participation, returns."""

    window_start: date
    window_end: date
    sessions: int = Field(ge=1)
    fills: int = Field(ge=0)
    traded_value: float = Field(ge=0, description="Σ |quantity × price| in CNY.")
    costs: CostBreakdown
    costs_over_nav: float = Field(description="Total costs / mean NAV over the window.")
    impact_share_of_costs: float | None = Field(
        description="Impact / total costs; null without costs."
    )
    adv_participation_median: float | None
    adv_participation_max: float | None
    fills_over_participation_cap: int = Field(ge=0)
    frictionless_return: float = Field(
        description="Compounded frictionless return over the window."
    )
    realized_return: float = Field(description="Compounded realized return over the window.")


class Diagnostics(_Strict):
    """Where the loss comes from: the live module and version, the root cause, its evidence."""

    module: str = Field(max_length=100, pattern=MODULE_PATTERN)
    strategy_version: str | None = Field(max_length=64)
    root_cause: ShortText
    execution_log: str | None = Field(
        max_length=1_024, description="Path or artifact key of the execution log."
    )
    evidence: Evidence
    findings: list[ShortText] = Field(default_factory=list, max_length=50)


class Constraints(_Strict):
    """The mandate as numbers the Test Author encodes and cross-validation checks before
    promotion."""

    rebalance: Rebalance
    max_adv_participation: float = Field(gt=0, le=1, description="Cap on one order's share of ADV.")
    max_weekly_turnover: float = Field(
        gt=0, description="Cap on Σ|Δw| traded per week, fraction of NAV."
    )
    max_position_weight: float | None = Field(default=None, gt=0, le=1)
    max_drawdown: float | None = Field(
        default=None, gt=0, le=1, description="Largest drawdown tolerated in the validation replay."
    )
    min_information_ratio: float | None = Field(
        default=None, description="Floor on the validation replay's IR vs the CSI 300."
    )


class Autopsy(_Strict):
    """A financial degradation event: superset of the paper's autopsy example."""

    event: Literal["FINANCIAL_DEGRADATION_DETECTED"] = EVENT
    schema_version: Literal[1] = 1
    alert_id: AlertId
    account: AccountName
    as_of: date
    severity: Severity
    trigger: Trigger
    metrics: AutopsyMetrics
    diagnostics: Diagnostics
    mandate: str = Field(min_length=1, max_length=4_000)
    constraints: Constraints


class LossAlert(_Strict):
    """The least a sender may post: which account lost money, the alert's id, maybe when.

    The repair completes it from the ledger: the account's active strategy and its NAV history.
    """

    alert_id: AlertId
    account: AccountName
    as_of: date | None = None


class AlertModule(_Strict):
    """The strategy module a loss alert's repair works on, found from the ledger."""

    module: str = Field(max_length=100, pattern=MODULE_PATTERN)


class PendingAlert(LossAlert):
    """A loss alert the ledger could not complete into an autopsy.

    There was no NAV history, or the critic could not read it. It is the alert as sent, with the
    module the repair works on.
    """

    diagnostics: AlertModule


# What a door admits: a full autopsy or a loss alert.
# What the repair works from: an autopsy, or an alert the ledger could not complete.
RepairInput = Autopsy | LossAlert
Completed = Autopsy | PendingAlert


def input_json(autopsy: Autopsy | LossAlert) -> dict[str, Any]:
    """The JSON form of a repair input, as files, events, flow parameters and artifacts hold it.

    An autopsy goes in full, an alert without its unset fields.
    """
    return autopsy.model_dump(mode="json", exclude_none=not isinstance(autopsy, Autopsy))


def stored_input(data: Any) -> Autopsy | PendingAlert | LossAlert:
    """A repair input as a run folder's autopsy.json holds it.

    The door checked it when it came in. Anything else raises pydantic's ValidationError (a
    ValueError).
    """
    if isinstance(data, dict) and "event" in data:
        return Autopsy.model_validate(data)
    if isinstance(data, dict) and "diagnostics" in data:
        return PendingAlert.model_validate(data)
    return LossAlert.model_validate(data)


def autopsy_schema() -> dict[str, Any]:
    """The JSON Schema of the Autopsy (draft 2020-12, as pydantic generates it)."""
    schema = Autopsy.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://oomrl.dev/schemas/autopsy.schema.json"
    return schema


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    """Write the exported schema file (committed in the repo; a test keeps it in sync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(autopsy_schema(), indent=2, sort_keys=True) + "\n")
    return path


# `python -m oomrl.diagnostics.autopsy` refreshes the file
if __name__ == "__main__":  # pragma: no cover
    print(write_schema())
