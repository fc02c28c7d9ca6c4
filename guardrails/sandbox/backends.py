"""The lock backend a run asks for by name, or the strongest one available."""

from __future__ import annotations

from guardrails.errors import GateSetupError
from guardrails.sandbox.bwrap import BwrapLock
from guardrails.sandbox.locks import LOCKS, DockerLock, HashOnlyLock, RoLock


def select_lock(name: str | None) -> RoLock:
    """The backend asked for (None: the strongest available); refuse what is not available."""
    if name is None:
        problem = BwrapLock.available()
        if problem is None:
            return BwrapLock()
        raise GateSetupError(
            f"no OS-level sandbox available ({problem}); install bubblewrap, or "
            "ask for --lock docker or --lock hash-only by name"
        )
    if name == "hash-only":
        return HashOnlyLock()
    if name in ("bwrap", "namespace"):  # `namespace`: the former hand-made backend's name
        problem = BwrapLock.available()
        if problem:
            raise GateSetupError(
                f"--lock {name} unavailable: {problem}; "
                "use --lock hash-only to run without an OS-level lock"
            )
        return BwrapLock()
    if name == "docker":
        return DockerLock(DockerLock.connect())
    raise GateSetupError(f"unknown lock backend {name!r}: choose one of {', '.join(LOCKS)}")
