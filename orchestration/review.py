"""The review pause: a run waits Paused for a person's answer in the Prefect UI.

The form shows the proposal with its units and bounds. No answer in time rejects.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

import pydantic
from prefect import get_run_logger
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.input import RunInput, keyset_from_paused_state
from prefect.input.actions import read_flow_run_input
from prefect.states import Paused, Running, State
from prefect.utilities.engine import propose_state_sync
from pydantic import Field

from oomrl.agent.roles import TEST_NODE_ID, Mandate
from oomrl.diagnostics.autopsy import Autopsy, LossAlert, stored_input
from oomrl.diagnostics.mandate import Constraints
from oomrl.repair import loop as domain

Reviewed = TypeVar("Reviewed", bound=RunInput)
# How often a paused run looks for the reviewer's answer (Prefect's own pause: 10 s)
PAUSE_POLL_S = 10.0
PAUSE_GRACE_S = 300  # the server's pause deadline lies this far beyond the run's own


def ask_reviewer(mandate: Mandate, timeout_s: int, run_dir: Path | None = None) -> domain.Decision:
    """Pause the run until a person answers in the UI; no answer within the timeout rejects.

    The form shows the alert's metrics from the run folder's autopsy.json. That is the completed
    autopsy, which run_repair writes before the Critic runs.
    """
    autopsy = read_run_autopsy(run_dir)
    answer, timed_out = wait_for_review(review_form(mandate, autopsy, timeout_s), timeout_s)
    if answer is None:  # fail closed, and say which way the answer went missing
        reason = (
            f"no decision within {timeout_s} s: a timeout rejects"
            if timed_out
            else "resumed without an answer (no decision in the form): no decision rejects"
        )
        return domain.Decision(action="reject", reason=reason)
    return answer.to_decision(mandate)


def read_run_autopsy(run_dir: Path | None) -> Autopsy | LossAlert | None:
    """The run folder's autopsy.json as the repair wrote it; None when there is none to show."""
    path = run_dir / "autopsy.json" if run_dir is not None else None
    if path is None or not path.exists():
        return None
    try:
        return stored_input(json.loads(path.read_text()))
    except ValueError:  # not what run_repair writes: the form shows the mandate without the alert
        return None


def wait_for_review(
    review: type[Reviewed],
    timeout_s: int,
    poll_s: float = PAUSE_POLL_S,
    pause_key: str = "mandate-review",
) -> tuple[Reviewed | None, bool]:
    """`pause_flow_run(wait_for_input=review)` with the timeout in the run's hands.

    Returns the answer (None when there is none) and whether the timeout ran out.

    Prefect's own pause ends on the server at the moment the run gives up. The server then turns
    whatever the run proposes into Failed ("paused and never resumed"). Here the server's deadline
    is PAUSE_GRACE_S later. At our deadline the run resumes itself and ends as rejected by timeout.
    The process stays alive while paused, so the repair's claim heartbeat keeps beating.

    Public parts are used where they keep the behaviour: `keyset_from_paused_state`,
    `RunInput.save`, `read_flow_run_input`. `pause_flow_run` cannot set a server deadline apart from
    the run's. So the pause is proposed with `propose_state_sync`, as `pause_flow_run` does inside.
    `RunInput.load` turns a missing answer into the form's defaults (approve). So the answer is
    read raw, and a missing one stays None.
    """
    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        raise RuntimeError("a mandate review needs a flow run")
    run_id = context.flow_run.id
    paused: State[Any] = Paused(
        timeout_seconds=timeout_s + PAUSE_GRACE_S, reschedule=False, pause_key=pause_key
    )
    keyset = keyset_from_paused_state(paused)
    paused.state_details.run_input_keyset = cast(dict[str, str], keyset)  # its Literal keys are str
    logger = get_run_logger()
    timed_out = False
    with get_client(sync_client=True) as client:
        state = propose_state_sync(client, paused, flow_run_id=run_id)
        if state.is_paused():
            review.save(keyset)
            logger.info(
                "paused for the %s; no answer within %d s ends it",
                pause_key.replace("-", " "),
                timeout_s,
            )
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
                current = client.read_flow_run(run_id).state
                if current is not None and current.is_running():
                    break
            else:  # nobody answered: leave the pause while the server still allows it
                timed_out = True
                current = client.read_flow_run(run_id).state
                if current is None or not current.is_running():
                    propose_state_sync(
                        client,
                        Running(message=f"no decision within {timeout_s} s"),
                        flow_run_id=run_id,
                    )
        elif not state.is_running():
            raise RuntimeError(
                f"the run could not pause for the review: the server answered {state.type}"
            )
    # Sync here
    answer = cast(
        dict[str, Any] | None, read_flow_run_input(keyset["response"], flow_run_id=run_id)
    )
    return (review(**answer) if answer else None), timed_out


class MandateReview(RunInput):
    """The reviewer's answer in the Prefect UI: approve, edit (change the fields) or reject."""

    decision: Literal["approve", "edit", "reject"] = Field(
        "approve",
        title="Decision",
        description="approve the proposed mandate, edit it (change the fields below), or reject it",
    )
    text: str = Field(
        "",
        title="Mandate (text)",
        description="The mandate in words, what the repair must achieve (edit only; empty keeps "
        "the proposal's)",
    )
    rebalance: Literal["daily", "weekly", "biweekly", "monthly"] | None = Field(
        None,
        title="Rebalance (how often)",
        description="How often the strategy may trade: at most one rebalance a day, week, two "
        "weeks or "
        "month (edit only)",
    )
    # The bounds are the mandate's (oomrl.diagnostics.mandate.Constraints): the form refuses what
    # a repair would.
    max_adv_participation: float | None = Field(
        None,
        gt=0,
        le=1,
        title="Max ADV participation (fraction of ADV)",
        description="Largest order as a fraction of the stock's average daily volume, above 0 "
        "and at "
        "most 1 "
        "(0.05 = 5 %; edit only)",
    )
    max_weekly_turnover: float | None = Field(
        None,
        gt=0,
        le=2,
        title="Max weekly turnover (fraction of NAV)",
        description="Largest turnover in one week, Σ|Δw| as a fraction of NAV, above 0 and at "
        "most 2 "
        "(0.3 = 30 %; edit only)",
    )
    supersedes: list[Annotated[str, Field(pattern=TEST_NODE_ID)]] = Field(
        default_factory=list,
        title="Superseded old tests (node ids)",
        description="Old tests the mandate makes obsolete, one node id each "
        "(tests/strategies/test_x.py::test_name): only these may be rewritten by the "
        "repair's tests (judged as red tests); every other old test may only be added "
        "to (edit only)",
    )
    reason: str = Field(
        "",
        title="Reason (text)",
        description="Why: kept in the run's outcome and the version's notes",
    )

    @classmethod
    def prefilled(cls, description: str, **values: Any) -> type[MandateReview]:
        """A form whose fields default to `values`, keeping each field's title, text and bounds.

        Prefect's `with_initial_data` rebuilds each prefilled field from its type alone. That drops
        the description the UI shows and the bounds the form enforces.
        """
        fields: dict[str, Any] = {}
        for key, value in values.items():
            original = cls.model_fields[key]
            info = copy.copy(original)
            info.default, info.default_factory = value, None
            fields[key] = (original.annotation, info)
        model = pydantic.create_model(cls.__name__, __base__=cls, **fields)
        model._description = description
        return model

    def to_decision(self, proposed: Mandate) -> domain.Decision:
        """The domain decision; an edit keeps the proposal's module and alert id."""
        if self.decision != "edit":
            return domain.Decision(action=self.decision, reason=self.reason)
        constraints = {
            **proposed.constraints.model_dump(),
            "rebalance": self.rebalance,
            "max_adv_participation": self.max_adv_participation,
            "max_weekly_turnover": self.max_weekly_turnover,
        }
        edited = proposed.model_copy(
            update={
                "text": self.text or proposed.text,
                "constraints": Constraints.model_validate(constraints),
                "supersedes": list(dict.fromkeys(self.supersedes)),
                "rationale": f"{proposed.rationale} | edited by a reviewer: {self.reason}",
            }
        )
        return domain.Decision(action="edit", mandate=edited, reason=self.reason)


def review_form(
    mandate: Mandate, autopsy: Autopsy | LossAlert | None, timeout_s: int
) -> type[MandateReview]:
    """The form for this mandate: its text rounded with units.

    The fields are prefilled with the proposal.
    """
    from oomrl.repair.artifacts import mandate_markdown

    c = mandate.constraints
    return MandateReview.prefilled(
        mandate_markdown(mandate, autopsy, timeout_s),
        text=mandate.text,
        rebalance=c.rebalance,
        max_adv_participation=c.max_adv_participation,
        max_weekly_turnover=c.max_weekly_turnover,
        supersedes=list(mandate.supersedes),
    )
