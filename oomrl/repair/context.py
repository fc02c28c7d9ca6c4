"""What one repair carries from step to step: parts, attempts, trail, each role's input audit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from oomrl.agent.budget import Budget
from oomrl.agent.llm import Transcript
from oomrl.agent.machine import Trail
from oomrl.agent.roles import Mandate, MissedCheck, Provider
from oomrl.agent.verdicts import AttemptVerdict
from oomrl.settings import AgentSettings

if TYPE_CHECKING:
    from guardrails.verdict import Verdict
    from oomrl.repair.crossval import CrossValidation, VersionMapper
    from oomrl.repair.versions import StrategyVersions

GateFn = Callable[..., "Verdict"]
CrossValidator = Callable[["RepairContext", Mandate], "CrossValidation"]


class AttemptRecord(BaseModel):
    """One role answer, the gate's verdict on it (or why it never reached the gate), its
    encoding."""

    phase: str
    attempt: int
    round: int = 1
    diff: str
    notes: str = ""
    verdict: AttemptVerdict
    feedback: dict[str, Any] = {}
    answer_key: str | None = None  # what a deterministic provider's answer depended on

    @property
    def accepted(self) -> bool:
        return self.verdict.accepted


class RoleInput(BaseModel):
    """Where what one role was shown is written (inputs/<role>-<label>.json), and its digest."""

    role: str
    label: str
    round: int
    sha256: str
    file: str


def write_json(path: Path, payload: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=True, default=str), encoding="utf-8")
    return path


def _default_mapper() -> VersionMapper:
    from oomrl.repair.crossval import run_in_process

    return run_in_process


@dataclass
class RepairState:
    """What changes while a repair runs: its attempts, rounds, what the replays found, its trail."""

    attempts: list[AttemptRecord] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    round: int = 1
    missed: list[MissedCheck] = field(default_factory=list)  # what the last replay found
    # Replays of the Coder's patches
    cross_feedback: list[dict[str, Any]] = field(default_factory=list)
    inputs: list[RoleInput] = field(default_factory=list)
    trail: Trail = field(default_factory=Trail)
    # The account's active version when the repair began: every candidate is cloned at it, and the
    # replay compares with it, whatever another account promoted meanwhile.
    base: str | None = None


@dataclass(frozen=True)
class RepairContext:
    """What one repair is given, fixed from its start (another setup is `dataclasses.replace`), and
    its running `state`; the candidate is a scratch clone in the run folder."""

    versions: StrategyVersions
    provider: Provider
    budget: Budget
    transcript: Transcript
    run_dir: Path
    account: str
    gate: GateFn
    cross_validator: CrossValidator
    agent: AgentSettings
    lock: str = "namespace"
    # Held-out tests: the gate runs them on code patches, no role reads them
    holdout: Path | None = None
    # How cross-validation runs the active and candidate replays. A flow may fan them out on Dask.
    version_mapper: VersionMapper = field(default_factory=_default_mapper)
    # How long a repair that claims its account itself (run_repair without `hold`) waits for
    # another.
    claim_wait_s: float = 6 * 3600.0
    state: RepairState = field(default_factory=RepairState)

    @property
    def candidate(self) -> Path:
        return self.run_dir / "candidate"

    def record_inputs(self, role: str, view: BaseModel, label: str) -> RoleInput:
        """Write exactly what a role is shown to inputs/<role>-<label>.json, for audit; its
        digest."""
        payload = view.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        path = write_json(
            self.run_dir / "inputs" / f"{role}-{label}.json",
            {
                "role": role,
                "label": label,
                "round": self.state.round,
                "sha256": digest,
                "view": payload,
            },
        )
        entry = RoleInput(
            role=role,
            label=label,
            round=self.state.round,
            sha256=digest,
            file=str(path.relative_to(self.run_dir)),
        )
        self.state.inputs.append(entry)
        return entry
