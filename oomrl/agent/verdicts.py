"""The verdict on one role answer: the gate's, the gate's again for a repeat, or a pre-gate one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Tag

from guardrails.verdict import Verdict, Violation


class RepeatVerdict(Verdict):
    """A rejected answer given again: its earlier verdict, the repeat named first. No gate run."""

    judge: Literal["repeat"] = "repeat"


class PreGateVerdict(BaseModel):
    """An answer refused before the gate ran (an unparseable diff, an invalid answer).

    No gate run is spent."""

    accepted: Literal[False] = False
    phase: str
    violations: list[Violation]
    judge: Literal["pre-gate"] = "pre-gate"


def _judge(value: Any) -> str:
    """Who judged: `repeat`, `pre-gate`, else the gate (a verdict as JSON or as a model)."""
    judge = value.get("judge") if isinstance(value, dict) else getattr(value, "judge", None)
    return str(judge or "gate")


# Serialised as each model dumps. A gate verdict as `oomrl gate --json` prints it; the others with
# `judge`.
AttemptVerdict = Annotated[
    Annotated[Verdict, Tag("gate")]
    | Annotated[RepeatVerdict, Tag("repeat")]
    | Annotated[PreGateVerdict, Tag("pre-gate")],
    Discriminator(_judge),
]


def repeat_of(earlier: Verdict, attempt: int) -> RepeatVerdict:
    """The earlier verdict again, for the same patch given again, the repeat named first."""
    repeat = Violation(
        rule="answer.repeated", message=f"the same patch as attempt {attempt}, which was rejected"
    )
    fields = {name: getattr(earlier, name) for name in Verdict.model_fields}
    return RepeatVerdict(**{**fields, "violations": [repeat, *earlier.violations]})
