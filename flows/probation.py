"""The probation review: a person judges a challenger's forward evidence in the Prefect UI.

The person promotes it, retires it, or leaves the decision to the daily chain.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Completed, State

from oomrl.build_info import flow_version
from oomrl.errors import OomrlError
from oomrl.settings import settings_for
from orchestration.review import wait_for_review
from tasks.expected_ends import configure_flow_logging
from tasks.probation import ProbationReview, decide_early, probation_evidence

FLOW_VERSION = flow_version()
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs
NO_FLOW_RETRIES = (
    "a review waits for a person and decides once; a retried run would ask again, and a refusal "
    "(no such probation) is a final answer"
)


@flow(name="probation-review", version=FLOW_VERSION, retries=0, log_prints=True)
def probation_review(
    account: str | None = None,
    version: str | None = None,
    timeout_s: int = 3600,
    home: str | None = None,
) -> dict[str, Any] | State:
    """Show a challenger's forward evidence and ask a person what to do.

    The answers are: promote it now, retire it now, or keep it.

    Args:
        account: The paper account whose challenger is on probation. Empty: OOMRL_ACCOUNT, `paper`
            by default.
        version: The challenger's version tag, e.g. `v2`. Empty: the account's challenger on
            probation.
        timeout_s: How long the run waits Paused for the answer, in seconds. No answer keeps the
            probation.
        home: Internal: OOMRL_HOME on the worker (folder). Leave empty to use the worker's setting.
    """
    logger = get_run_logger()
    name = account or settings_for(home).ledger.account
    try:
        tag, evidence = probation_evidence(name, version, home)
    except OomrlError as exc:  # no such probation: say so, change nothing
        logger.warning("probation review refused: %s", exc)
        return Completed(name="Refused", message=str(exc))
    answer, timed_out = wait_for_review(
        ProbationReview.showing(evidence), timeout_s, pause_key="probation-review"
    )
    if answer is None or answer.decision == "keep":
        why = (
            "no answer in time"
            if timed_out
            else ("kept on probation" if answer else "resumed without an answer")
        )
        return Completed(name="Kept", message=f"{tag} stays on probation on {name} ({why})")
    done = decide_early(
        name,
        tag,
        answer.decision,
        "a person in the Prefect UI (probation-review)",
        answer.reason,
        home,
    )
    print(f"{tag} {done['status']} on {name}: {done['reason']}")
    return done
