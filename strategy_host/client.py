"""The caller's side of a strategy host channel: requests, answers, and S's exceptions by type."""

from __future__ import annotations

import builtins
import time
from typing import Any

from strategy_host import wire

ANSWER_LIMIT = 64 << 20  # an answer is weights, a due list or a plain value: never near this
# Exceptions S raises come back as these builtin types (a subclass of StrategyError and the builtin),
# so `pytest.raises(ValueError)` works; anything else, AssertionError included, is a StrategyError.
MAPPED = ("ValueError", "TypeError", "KeyError", "IndexError", "LookupError", "ZeroDivisionError",
          "ArithmeticError", "OverflowError", "AttributeError", "RuntimeError", "NotImplementedError",
          "RecursionError", "UnicodeError")
_CLASSES: dict[str, type[StrategyError]] = {}


class HostError(Exception):
    """The host broke the protocol, died, or did not answer in time."""


class StrategyError(Exception):
    """An exception raised by strategy code in the host (its type name and where it was raised)."""

    def __init__(self, message: str, type_name: str, where: list[Any] | None = None,
                 kind: str = "strategy") -> None:
        super().__init__(message)
        self.message, self.type_name, self.where, self.kind = message, type_name, where, kind

    def __str__(self) -> str:
        return self.message


def remote_error(error: Any) -> StrategyError:
    """The exception to raise for an error answer (checked field by field)."""
    if not isinstance(error, dict):
        return StrategyError("the host answered with a malformed error", "HostError", None, "request")
    message = str(error.get("message", ""))[:4000]
    name = str(error.get("type", "Exception"))[:200]
    builtin = error.get("builtin") if error.get("builtin") in MAPPED else None
    where = error.get("where") if isinstance(error.get("where"), list) else None
    kind = "request" if error.get("kind") == "request" else "strategy"
    if builtin is None:
        return StrategyError(message, name, where, kind)
    cls = _CLASSES.get(builtin)
    if cls is None:
        base = getattr(builtins, builtin)
        cls = _CLASSES[builtin] = type(f"Strategy{builtin}", (StrategyError, base), {})
    return cls(message, name, where, kind)


class Channel:
    """Frames to and from a host over two file descriptors, with a deadline per answer."""

    def __init__(self, read_fd: int, write_fd: int, timeout_s: float = 60.0,
                 limit: int = ANSWER_LIMIT) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.timeout_s, self.limit = timeout_s, limit
        self.pending = 0

    def _deadline(self, timeout_s: float | None) -> float:
        return time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)

    def send(self, message: dict[str, Any], timeout_s: float | None = None) -> None:
        """Send a request without waiting for its answer (answers come back in order)."""
        try:
            wire.write_frame(self.write_fd, wire.encode(message), self._deadline(timeout_s))
        except (wire.WireError, OSError) as exc:
            raise HostError(f"could not send to the strategy host: {exc}") from None
        self.pending += 1

    def receive(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The next answer; StrategyError when it is an error, HostError when there is none."""
        try:
            answer = wire.read_frame(self.read_fd, self.limit, self._deadline(timeout_s))
        except EOFError:
            raise HostError("the strategy host closed its channel (it exited or was killed)") from None
        except (wire.WireError, OSError) as exc:
            raise HostError(f"bad answer from the strategy host: {exc}") from None
        self.pending -= 1
        if "error" in answer:
            raise remote_error(answer["error"])
        return answer

    def request(self, message: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send and wait for this request's answer (after any still pending)."""
        self.send(message, timeout_s)
        while self.pending > 1:
            self.receive(timeout_s)
        return self.receive(timeout_s)
