"""Tasks of the probations (oomrl/repair/probation.py): trade the shadow books, decide the ripe
ones, say so."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any, Literal

import pydantic
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event
from prefect.input import RunInput
from pydantic import Field

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.events import FORWARD_AUTOPSY_LABEL, PROMOTED_EVENT, RETIRED_EVENT, account_resource
from oomrl.settings import settings_for
from tasks.retry import unless_refused

if TYPE_CHECKING:  # the tasks import the domain lazily
    from oomrl.repair.probation import Decided, Probation

READ_RETRIES = 2


@task(
    name="trade-shadow-books",
    cache_policy=NO_CACHE,
    retries=READ_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def trade_shadows(as_of: date, home: str | None = None) -> dict[str, int]:
    """Every open challenger trades its shadow book on its own schedule through `as_of` (before
    marking)."""
    from oomrl.repair.probation import advance_shadows

    return advance_shadows(settings_for(home), as_of)


@task(
    name="decide-probations",
    cache_policy=NO_CACHE,
    retries=READ_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def decide_probations(as_of: date, home: str | None = None) -> dict[str, Any]:
    """Promote or retire every challenger whose forward sessions are done; show the running ones."""
    from oomrl.repair.probation import decide_due

    decided, running = decide_due(settings_for(home), as_of)
    for found in running:
        publish_evidence(found.account, found.version, found.markdown(), "running")
    return {
        "decided": [announce(done) for done in decided],
        "running": [
            {
                "account": f.account,
                "version": f.version,
                "sessions": f.sessions_done,
                "needed": f.sessions_needed,
            }
            for f in running
        ],
    }


class ProbationReview(RunInput):
    """A person's answer on a challenger in the Prefect UI.

    Promote it now, retire it now, or keep it on probation.
    """

    decision: Literal["keep", "promote", "retire"] = Field(
        "keep",
        title="Decision",
        description="keep the challenger on probation (the daily chain decides), promote it "
        "now (it "
        "takes the "
        "account's capital), or retire it now (its shadow book closes)",
    )
    reason: str = Field(
        "", title="Reason (text)", description="Why: kept in the ledger and the repair's trail"
    )

    @classmethod
    def showing(cls, evidence: str) -> type[ProbationReview]:
        """The form with the evidence as its description.

        It is a subclass, so the fields keep titles and descriptions.
        """
        model = pydantic.create_model(cls.__name__, __base__=cls)
        model._description = evidence
        return model


@task(
    name="probation-evidence",
    cache_policy=NO_CACHE,
    retries=READ_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def probation_evidence(account: str, tag: str | None, home: str | None = None) -> tuple[str, str]:
    """The challenger's tag and its forward evidence so far, as markdown.

    It is published as the probation's artifact.
    """
    from oomrl.repair.probation import current

    _, probation, found = current(settings_for(home), account, tag)
    markdown = found.markdown()
    publish_evidence(account, probation.tag, markdown, "under review")
    return probation.tag, markdown


@task(name="decide-probation", cache_policy=NO_CACHE)
def decide_early(
    account: str,
    tag: str,
    decision: Literal["promote", "retire"],
    by: str,
    reason: str,
    home: str | None = None,
) -> dict[str, Any]:
    """Promote or retire the challenger now, on its evidence so far; the event says so."""
    from oomrl.repair.probation import decide_now

    done = decide_now(
        settings_for(home),
        account,
        tag,
        "promoted" if decision == "promote" else "retired",
        by,
        reason,
    )
    return announce(done)


def announce(done: Decided) -> dict[str, Any]:
    """A decided probation's artifact and event; its summary with the autopsy's id for the flow's
    result (the one place a decision becomes a dict)."""
    publish_evidence(
        done.probation.account, done.probation.tag, done.evidence.markdown(), done.probation.status
    )
    emit_decision(done.probation, done.autopsy)
    return {**done.probation.summary(), "autopsy": done.autopsy.alert_id if done.autopsy else None}


def publish_evidence(account: str, tag: str, markdown: str, status: str) -> None:
    """The champion and challenger side by side, one artifact per probation.

    Its latest is the current one.
    """
    key = f"probation-{account}-{tag}".lower().replace("_", "-").replace(".", "-")
    create_markdown_artifact(
        markdown=markdown, key=key[:100], description=f"probation of {tag} on {account}: {status}"
    )


def emit_decision(probation: Probation, autopsy: Autopsy | None) -> str | None:
    """`oomrl.strategy.promoted` or `oomrl.strategy.retired` (with the forward autopsy) for a
    decided probation."""
    # The label is what the repair deployment's retired-challenger trigger matches.
    # Only an event that carries a forward autopsy starts the next repair.
    summary = probation.summary()
    event = emit_event(
        event=PROMOTED_EVENT if probation.status == "promoted" else RETIRED_EVENT,
        resource={
            **account_resource(probation.account),
            FORWARD_AUTOPSY_LABEL: "yes" if autopsy else "no",
        },
        related=[
            {
                "prefect.resource.id": f"oomrl.strategy.{probation.strategy}",
                "prefect.resource.role": "strategy",
            }
        ],
        payload={
            "tag": probation.tag,
            "sha": probation.sha,
            "strategy": probation.strategy,
            "probation": {
                k: summary[k] for k in ("started", "decided", "sessions", "decided_by", "reason")
            },
            **({"autopsy": autopsy.model_dump(mode="json")} if autopsy else {}),
        },
    )
    return str(event.id) if event else None
