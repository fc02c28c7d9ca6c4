"""The repair's state machine (paper's Algorithm 1): states, allowed transitions, a run's trail."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from oomrl.errors import IllegalTransitionError

STATES = (
    "critic",
    "approval",
    "test-genesis",
    "logic-genesis",
    "cross-validation",
    "promotion",
    "probation",
    "promoted",
    "retired",
    "rejected",
    "failed",
)
TERMINAL = ("promoted", "retired", "rejected", "failed")
# A repair run ends on probation; the daily chain takes it on from there
RUN_ENDS = (*TERMINAL, "probation")
# (from, to) -> when it is taken. docs/agent.md draws this table and names the test of each edge.
TRANSITIONS: dict[tuple[str, str], str] = {
    ("critic", "approval"): "the Critic proposed a mandate",
    ("critic", "failed"): "no usable mandate (unknown module, endpoint down, out of money)",
    ("approval", "test-genesis"): "a person approved or edited the mandate",
    ("approval", "rejected"): "a person rejected it, or did not answer in time",
    (
        "approval",
        "failed",
    ): "the approval could not be asked, or the account stayed busy or was repaired meanwhile",
    (
        "test-genesis",
        "test-genesis",
    ): "the gate rejected the tests: the verdict, encoded, goes back",
    ("test-genesis", "logic-genesis"): "the gate accepted tests that fail on the old source",
    (
        "test-genesis",
        "failed",
    ): "attempt ceiling, out of money, a deterministic repeat, or no judge",
    (
        "logic-genesis",
        "logic-genesis",
    ): "the gate rejected the patch: the verdict, encoded, goes back",
    ("logic-genesis", "cross-validation"): "the gate accepted the patch",
    (
        "logic-genesis",
        "failed",
    ): "attempt ceiling, out of money, a deterministic repeat, or no judge",
    (
        "cross-validation",
        "test-genesis",
    ): "the replay failed a check: back to the tests with what they missed",
    ("cross-validation", "promotion"): "the replay passed every check",
    ("cross-validation", "failed"): "the replay failed a check in the last round",
    ("promotion", "promoted"): "committed, tagged and activated in one transaction",
    ("promotion", "failed"): "promotion failed; workspace and active version restored",
    ("promotion", "probation"): "committed and tagged; the challenger trades a shadow book forward",
    ("probation", "promoted"): "its forward sessions passed every check, or a person promoted it",
    (
        "probation",
        "retired",
    ): "worse forward, a constraint broken or halted, or a person retired it",
}


@dataclass(frozen=True)
class Move:
    """One transition a repair took, and why."""

    source: str
    target: str
    reason: str
    at: str


class Trail:
    """The states a repair went through, checked against TRANSITIONS and written as JSON lines."""

    def __init__(self, path: Path | None = None) -> None:
        self.state = "critic"
        self.moves: list[Move] = []
        self.path = path

    @classmethod
    def resumed(cls, path: Path, state: str) -> Trail:
        """The trail of a run that ended in `state` (a probation).

        Whoever decides it continues it."""
        trail = cls(path)
        trail.state = state
        return trail

    def move(self, target: str, reason: str) -> None:
        """Take the transition to `target`; IllegalTransitionError when the machine has no such
        edge."""
        if (self.state, target) not in TRANSITIONS:
            raise IllegalTransitionError(f"the repair cannot go from {self.state} to {target}")
        step = Move(self.state, target, reason, datetime.now(UTC).isoformat())
        self.moves.append(step)
        self.state = target
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(step)) + "\n")

    def edges(self) -> list[tuple[str, str]]:
        return [(m.source, m.target) for m in self.moves]
