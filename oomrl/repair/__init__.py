"""The repair room: the repair loop, versions, promotion, probation, cross-validation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.repair.artifacts import mandate_markdown, not_measured_rows
    from oomrl.repair.chain import mark_active_accounts, report_gap, stored_as_of
    from oomrl.repair.claims import CLAIM_SILENT_S, ClaimBook, RepairClaim
    from oomrl.repair.context import (
        AttemptRecord,
        CrossValidator,
        GateFn,
        RepairContext,
        RepairState,
        RoleInput,
        write_json,
    )
    from oomrl.repair.crossval import (
        CrossValidation,
        PromotionRule,
        VersionMapper,
        VersionMeasures,
        cross_validate,
        crossval_markdown,
        crossval_rows,
        replay_version,
        run_in_process,
        window_for,
    )
    from oomrl.repair.endings import ending_name
    from oomrl.repair.evidence import evidence_chart
    from oomrl.repair.genesis import changed_tests, logic_genesis, test_genesis
    from oomrl.repair.inputs import (
        admit,
        check_known,
        check_transcript,
        load_autopsy,
        parse_json,
        read_autopsy_file,
    )
    from oomrl.repair.loop import (
        Decision,
        RepairNotPromoted,
        RepairOutcome,
        claim_for,
        open_context,
        run_repair,
    )
    from oomrl.repair.probation import (
        Decided,
        Probation,
        advance_shadows,
        decide_due,
        decide_now,
        is_shadow,
        open_probations,
        probations,
        version_states,
    )
    from oomrl.repair.promotion import open_workspace, promote, recover
    from oomrl.repair.trading import resolve_strategy, run_rebalance
    from oomrl.repair.versions import StrategyVersions, VersionInfo, start_on_v1

__all__ = [
    "CLAIM_SILENT_S",
    "AttemptRecord",
    "ClaimBook",
    "CrossValidation",
    "CrossValidator",
    "Decided",
    "Decision",
    "GateFn",
    "Probation",
    "PromotionRule",
    "RepairClaim",
    "RepairContext",
    "RepairNotPromoted",
    "RepairOutcome",
    "RepairState",
    "RoleInput",
    "StrategyVersions",
    "VersionInfo",
    "VersionMapper",
    "VersionMeasures",
    "admit",
    "advance_shadows",
    "changed_tests",
    "check_known",
    "check_transcript",
    "claim_for",
    "cross_validate",
    "crossval_markdown",
    "crossval_rows",
    "decide_due",
    "decide_now",
    "ending_name",
    "evidence_chart",
    "is_shadow",
    "load_autopsy",
    "logic_genesis",
    "mandate_markdown",
    "mark_active_accounts",
    "not_measured_rows",
    "open_context",
    "open_probations",
    "open_workspace",
    "parse_json",
    "probations",
    "promote",
    "read_autopsy_file",
    "recover",
    "replay_version",
    "report_gap",
    "resolve_strategy",
    "run_in_process",
    "run_rebalance",
    "run_repair",
    "start_on_v1",
    "stored_as_of",
    "test_genesis",
    "version_states",
    "window_for",
    "write_json",
]
if not TYPE_CHECKING:  # a name loads its module on first use: the command line stays light
    __getattr__ = front_door(__name__, __file__)
