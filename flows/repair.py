"""The repair flow: autopsy -> approved mandate -> test genesis -> logic genesis -> cross-validation
-> promotion."""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Any

from prefect import flow, get_run_logger
from prefect.events import emit_event
from prefect.states import Completed, Failed, State

from oomrl.agent.roles import Mandate
from oomrl.build_info import flow_version
from oomrl.diagnostics.autopsy import input_json
from oomrl.errors import OomrlError, TooManyRepairsError
from oomrl.events import PROBATION_EVENT, PROMOTED_EVENT, account_resource
from oomrl.repair import loop as domain
from oomrl.repair.claims import ClaimBook, RepairClaim
from oomrl.run_tags import alert_tag
from oomrl.settings import get_settings
from orchestration.review import ask_reviewer
from tasks.crossval import version_mapper_from_settings
from tasks.expected_ends import configure_flow_logging
from tasks.repair import publish_autopsy, publish_outcome, run_step_as_task
from tasks.run_tags import add_run_tags

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs
NO_FLOW_RETRIES = (
    "a repair ends Failed on purpose (refused, patch rejected, cross-validation failed), which "
    "a flow retry would run again; transient errors are retried inside each step, and a "
    "repair is restarted by re-delivering its alert"
)


def auto_approve_mandate(mandate: Mandate) -> domain.Decision:
    return domain.Decision(action="approve", reason="auto-approved (unattended run)")


def end_state(outcome: domain.RepairOutcome) -> State[Any]:
    """The run's final state for an outcome.

    Promoted: Completed "Promoted". On probation: Completed "On probation". Rejected by a person or
    the timeout: Completed "Rejected". Refused or failed: Failed named after the step. Its data is
    the exception that carries the outcome. A Failed state's data must be an exception, or a worker
    cannot read the run's result.
    """
    name = domain.ending_name(outcome.status, outcome.step)
    if outcome.status in ("promoted", "probation", "rejected"):
        return Completed(name=name, message=outcome.reason, data=outcome.model_dump(mode="json"))
    return Failed(
        name=name,
        message=f"{outcome.step or 'repair'}: {outcome.reason}"[:2000],
        data=domain.RepairNotPromoted(outcome),
    )


def outcome_of(state: State[Any]) -> dict[str, Any]:
    """The outcome dict of a finished repair run's state, whichever way it ended."""
    if state.is_failed():
        error = state.result(raise_on_failure=False)
        if isinstance(error, domain.RepairNotPromoted):
            return error.outcome.model_dump(mode="json")
        return {"status": "failed", "step": None, "reason": state.message or "", "run_dir": ""}
    return dict(state.result())


def sent_alert_id(parameter: Any) -> Any:
    """The alert id of the flow's raw `autopsy` parameter (JSON, before the door checks it)."""
    return parameter.get("alert_id") if isinstance(parameter, dict) else None


@flow(name="repair", version=FLOW_VERSION, retries=0, log_prints=True)
def repair(
    autopsy: dict[str, Any],
    auto_approve: bool = False,
    provider: str | None = None,
    account: str | None = None,
    approval_timeout_s: int = 3600,
    lock: str = "namespace",
    probation: int | None = None,
) -> State[Any]:
    """Repair the strategy an autopsy names; ends Promoted, Rejected, or Failed naming the step.

    There are no flow retries (NO_FLOW_RETRIES).

    Args:
        autopsy: The loss alert to repair (JSON). A full autopsy, or `{"alert_id", "account",
            "as_of"}` that the repair completes from the ledger. The trigger and the webhook fill
            it.
        auto_approve: Approve the proposed mandate without asking a person (unattended runs only).
        provider: The agent's model provider. `offline` (rules, no network), `openai`
            (OOMRL_LLM_BASE_URL) or `replay`. Empty: the worker's setting.
        account: The paper account whose strategy version is repaired (empty: the autopsy's
            account).
        approval_timeout_s: How long the run waits Paused for a person's answer, in seconds. No
            answer by then rejects.
        lock: The gate's sandbox for every test run. `namespace` (bubblewrap, default), `bwrap`,
            `docker` or `hash-only`.
        probation: Forward sessions the repaired version trades a shadow book before the daily chain
            decides. Empty: the worker's OOMRL_AGENT_PROBATION_SESSIONS, 20. 0: it takes the capital
            at once.
    """
    from prefect.context import FlowRunContext

    logger = get_run_logger()
    settings = get_settings()
    sent = sent_alert_id(autopsy)
    if sent:  # however the run was started, and even when the door refuses it below
        add_run_tags([alert_tag(sent)])
    try:
        # The same door as the CLI and the webhook
        checked = domain.admit(autopsy, settings, account)
    except OomrlError as exc:  # bad input is not transient: report it, do not retry the run
        outcome = domain.RepairOutcome(status="failed", step="autopsy", reason=str(exc), run_dir="")
        publish_outcome(outcome)
        logger.warning("repair refused: %s", exc)
        return end_state(outcome)
    publish_autopsy(input_json(checked))
    name = account or checked.account
    context = FlowRunContext.get()
    run_id = str(context.flow_run.id) if context and context.flow_run else f"local-{time.time_ns()}"
    # Registered now and beating while the process lives, paused or not. The webhook reads the beat.
    # The account itself is held only after approval. Beyond OOMRL_REPAIR_MAX_RUNNING live repairs,
    # on any path, the run does not start. Prefect's deployment limit crashes paused runs
    # (docs/operations.md).
    claim = RepairClaim(
        ClaimBook(settings.ledger_url).create(),
        run_id,
        name,
        say=logger.info,
        limit=settings.agent.repair_max_running,
    )
    try:
        with claim:
            try:
                ctx = domain.open_context(
                    settings,
                    checked,
                    provider=provider,
                    account=account,
                    lock=lock,
                    probation=probation,
                )
            except OomrlError as exc:  # an unknown provider, a missing transcript: final, say so
                outcome = domain.RepairOutcome(
                    status="failed", step="setup", reason=str(exc), run_dir=""
                )
            else:
                ctx = replace(ctx, version_mapper=version_mapper_from_settings())
                approve = (
                    auto_approve_mandate
                    if auto_approve
                    else partial(ask_reviewer, timeout_s=approval_timeout_s, run_dir=ctx.run_dir)
                )
                outcome = domain.run_repair(
                    checked, ctx, approve, run_step=run_step_as_task, hold=claim.hold
                )
    except TooManyRepairsError as exc:
        outcome = domain.RepairOutcome(
            status="failed", step="capacity", reason=str(exc), run_dir=""
        )
    publish_outcome(outcome)
    if outcome.status in ("promoted", "probation") and outcome.version is not None:
        emit_event(
            event=PROMOTED_EVENT if outcome.status == "promoted" else PROBATION_EVENT,
            resource=account_resource(name),
            related=[
                {
                    "prefect.resource.id": f"oomrl.strategy.{outcome.version.strategy}",
                    "prefect.resource.role": "strategy",
                }
            ],
            payload={
                "tag": outcome.version.tag,
                "sha": outcome.version.sha,
                "strategy": outcome.version.strategy,
                "alert_id": checked.alert_id,
                "run_dir": outcome.run_dir,
            },
        )
    logger.info(
        "repair %s%s: %s",
        outcome.status,
        f" at {outcome.step}" if outcome.step else "",
        outcome.reason,
    )
    return end_state(outcome)
