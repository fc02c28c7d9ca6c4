"""The gate verdict and its violations: the one JSON object `oomrl gate --json` prints."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Phase = Literal["code-patch", "test-gen"]
PHASES: tuple[str, ...] = ("code-patch", "test-gen")


class Violation(BaseModel):
    """One broken rule: its name, where (path and line when known) and a message for the agent."""

    rule: str
    path: str | None = None
    line: int | None = None
    message: str


class TestCounts(BaseModel):
    """Outcome counts read from the gate's own results file."""

    collected: int = 0
    passed: int = 0
    failed: int = 0


class CoverageResult(BaseModel):
    """Branch coverage over the source trees and the required minimum (percent)."""

    percent: float = 0.0
    min: float = 95.0


class LockInfo(BaseModel):
    """Which RO-Lock backend ran and the manifest digests before and after the run."""

    backend: str
    before: str = ""
    after: str = ""


class Verdict(BaseModel):
    """The gate's decision; `accepted` is true only when `violations` is empty."""

    accepted: bool
    phase: str
    violations: list[Violation] = Field(default_factory=list)
    tests: TestCounts = Field(default_factory=TestCounts)
    coverage: CoverageResult = Field(default_factory=CoverageResult)
    locks: LockInfo
    duration_s: float = 0.0
    # Remarks for people (e.g. pre-existing failures); not part of the JSON verdict.
    notes: list[str] = Field(default_factory=list, exclude=True)

    def to_json(self) -> str:
        """The single JSON object `oomrl gate --json` prints."""
        return self.model_dump_json()
