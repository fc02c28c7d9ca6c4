"""The repair flow: autopsy -> approved mandate -> test genesis -> logic genesis -> cross-validation -> promotion."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from prefect import flow, get_run_logger, pause_flow_run
from prefect.events import emit_event
from prefect.exceptions import FlowPauseTimeout
from prefect.input import RunInput

from oomrl import repair as domain
from oomrl.agent.roles import Constraints, Mandate
from oomrl.build_info import flow_version
from oomrl.config import get_settings
from oomrl.errors import OomrlError
from oomrl.run_tags import alert_tag
from tasks.crossval import version_mapper_from_settings
from tasks.repair import publish_autopsy, publish_outcome, run_step_as_task
from tasks.run_tags import add_run_tags

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
PROMOTED_EVENT = "oomrl.strategy.promoted"


class MandateReview(RunInput):
    """The reviewer's answer in the Prefect UI: approve, edit (change the fields) or reject."""

    decision: Literal["approve", "edit", "reject"] = "approve"
    text: str = ""
    rebalance: Literal["daily", "weekly", "biweekly", "monthly"] | None = None
    max_adv_participation: float | None = None
    max_weekly_turnover: float | None = None
    reason: str = ""

    def to_decision(self, proposed: Mandate) -> domain.Decision:
        """The domain decision; an edit keeps the proposal's module and alert id."""
        if self.decision != "edit":
            return domain.Decision(action=self.decision, reason=self.reason)
        constraints = {**proposed.constraints.model_dump(), "rebalance": self.rebalance,
                       "max_adv_participation": self.max_adv_participation,
                       "max_weekly_turnover": self.max_weekly_turnover}
        edited = proposed.model_copy(update={
            "text": self.text or proposed.text,
            "constraints": Constraints.model_validate(constraints),
            "rationale": f"{proposed.rationale} | edited by a reviewer: {self.reason}"})
        return domain.Decision(action="edit", mandate=edited, reason=self.reason)


def ask_reviewer(mandate: Mandate, timeout_s: int) -> domain.Decision:
    """Pause the run until a person answers in the UI; no answer within the timeout rejects."""
    c = mandate.constraints
    review = MandateReview.with_initial_data(
        description=(f"## Proposed mandate for `{mandate.module}`\n\n{mandate.text}\n\n"
                     f"Constraints: `{c.model_dump_json(exclude_none=True)}`\n\n"
                     f"Why: {mandate.rationale}\n\nApprove, edit the fields, or reject."),
        text=mandate.text, rebalance=c.rebalance, max_adv_participation=c.max_adv_participation,
        max_weekly_turnover=c.max_weekly_turnover)
    try:
        answer = pause_flow_run(wait_for_input=review, timeout=timeout_s)
    except FlowPauseTimeout:
        return domain.Decision(action="reject", reason=f"no decision within {timeout_s} s: a timeout rejects")
    return answer.to_decision(mandate)


def auto_approve_mandate(mandate: Mandate) -> domain.Decision:
    return domain.Decision(action="approve", reason="auto-approved (unattended run)")


@flow(name="repair", version=FLOW_VERSION, retries=1, retry_delay_seconds=30, log_prints=True)
def repair(autopsy: dict[str, Any], auto_approve: bool = False, provider: str | None = None,
           account: str | None = None, approval_timeout_s: int = 3600,
           lock: str = "namespace") -> dict[str, Any]:
    """Repair the strategy an autopsy names; returns the outcome (promoted, rejected or failed at a step)."""
    logger = get_run_logger()
    settings = get_settings()
    if isinstance(autopsy, dict) and autopsy.get("alert_id"):  # however the run was started
        add_run_tags([alert_tag(autopsy["alert_id"])])
    try:
        checked = domain.admit(autopsy, settings, account)  # the same door as the CLI and the webhook
    except OomrlError as exc:  # bad input is not transient: report it, do not retry the run
        outcome = domain.RepairOutcome(status="failed", step="autopsy", reason=str(exc), run_dir="")
        publish_outcome(outcome)
        logger.error("repair refused: %s", exc)
        return outcome.model_dump(mode="json")
    publish_autopsy(checked)
    ctx = domain.open_context(settings, checked, provider=provider, account=account, lock=lock)
    ctx.version_mapper = version_mapper_from_settings()
    approve = auto_approve_mandate if auto_approve else partial(ask_reviewer, timeout_s=approval_timeout_s)
    outcome = domain.run_repair(checked, ctx, approve, run_step=run_step_as_task)
    publish_outcome(outcome)
    if outcome.status == "promoted" and outcome.version is not None:
        emit_event(event=PROMOTED_EVENT, resource={"prefect.resource.id": f"oomrl.account.{ctx.account}"},
                   related=[{"prefect.resource.id": f"oomrl.strategy.{outcome.version.strategy}",
                             "prefect.resource.role": "strategy"}],
                   payload={"tag": outcome.version.tag, "sha": outcome.version.sha,
                            "strategy": outcome.version.strategy, "alert_id": checked.get("alert_id"),
                            "run_dir": outcome.run_dir})
    logger.info("repair %s%s: %s", outcome.status, f" at {outcome.step}" if outcome.step else "",
                outcome.reason)
    return outcome.model_dump(mode="json")
