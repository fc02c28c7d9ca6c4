"""What a judging step reads of the gate's run: a Protocol, so judging never imports the gate."""

from __future__ import annotations

from typing import Protocol

from guardrails.sandbox.locks import RoLock
from guardrails.sandbox.runner import GateDirs, SuiteResult
from guardrails.workspace import GuardContract


class GateState(Protocol):
    """The fields of `guardrails.gate.GateRun` that the mutant and trivial checks read."""

    contract: GuardContract
    lock: RoLock
    dirs: GateDirs
    first: SuiteResult | None
