"""Loss diagnostics: alert rules, the Autopsy model and the deterministic critic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.diagnostics.autopsy import (
        SCHEMA_PATH,
        AlertModule,
        Autopsy,
        AutopsyMetrics,
        Completed,
        LossAlert,
        PendingAlert,
        RepairInput,
        autopsy_schema,
        input_json,
        stored_input,
        write_schema,
    )
    from oomrl.diagnostics.critic import autopsy_for
    from oomrl.diagnostics.diagnose import diagnose_account
    from oomrl.diagnostics.mandate import Constraints
    from oomrl.diagnostics.repair_policy import (
        REPAIR_LABEL,
        REPAIR_REQUEST,
        SEVERITY_LABEL,
        RepairDecision,
        alert_resource,
        judge,
        record,
        sessions_between,
    )
    from oomrl.diagnostics.rules import Alert, AlertConfig, alert_id, evaluate, load_config

__all__ = [
    "REPAIR_LABEL",
    "REPAIR_REQUEST",
    "SCHEMA_PATH",
    "SEVERITY_LABEL",
    "Alert",
    "AlertConfig",
    "AlertModule",
    "Autopsy",
    "AutopsyMetrics",
    "Completed",
    "Constraints",
    "LossAlert",
    "PendingAlert",
    "RepairDecision",
    "RepairInput",
    "alert_id",
    "alert_resource",
    "autopsy_for",
    "autopsy_schema",
    "diagnose_account",
    "evaluate",
    "input_json",
    "judge",
    "load_config",
    "record",
    "sessions_between",
    "stored_input",
    "write_schema",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)
