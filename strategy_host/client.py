"""The caller's side of a strategy host channel: requests, answers, and S's exceptions by type."""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable
from typing import Any

from strategy_host import wire

ANSWER_LIMIT = 64 << 20  # an answer is weights, a due list or a plain value: never near this
# Exceptions S raises come back as these builtin types (a subclass of StrategyError and the
# builtin), so `pytest.raises(ValueError)` works; anything else, AssertionError included, is a
# StrategyError.
MAPPED = (
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "LookupError",
    "ZeroDivisionError",
    "ArithmeticError",
    "OverflowError",
    "AttributeError",
    "RuntimeError",
    "NotImplementedError",
    "RecursionError",
    "UnicodeError",
)
_CLASSES: dict[str, type[StrategyError]] = {}


class HostError(Exception):
    """The host broke the protocol, died, or did not answer in time."""


class HostGone(HostError):
    """The host's end of the channel is closed: it exited, was killed or was stopped."""


class StrategyError(Exception):
    """An exception raised by strategy code in the host (its type name and where it was raised)."""

    def __init__(
        self, message: str, type_name: str, where: list[Any] | None = None, kind: str = "strategy"
    ) -> None:
        super().__init__(message)
        self.message, self.type_name, self.where, self.kind = message, type_name, where, kind

    def __str__(self) -> str:
        return self.message


def remote_error(error: Any) -> StrategyError:
    """The exception to raise for an error answer (checked field by field)."""
    if not isinstance(error, dict):
        return StrategyError(
            "the host answered with a malformed error", "HostError", None, "request"
        )
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
    """Frames to and from a host over two file descriptors.

    With `on_timeout` (the parent's side), a request not answered within its timeout makes a
    watchdog thread call it (to kill the host), so the blocked read ends; the error says why.
    `poll_s`: how long to wait for an answer by polling before a blocking read (see FrameReader).
    """

    def __init__(
        self,
        read_fd: int,
        write_fd: int,
        timeout_s: float = 60.0,
        limit: int = ANSWER_LIMIT,
        on_timeout: Callable[[], None] | None = None,
        poll_s: float = 0.0,
    ) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.timeout_s, self.limit = timeout_s, limit
        self.pending = 0
        self.reader = wire.FrameReader(read_fd, spin_s=poll_s)
        self.watchdog = Watchdog(on_timeout) if on_timeout is not None else None

    def _guarded(self, action: Callable[[], Any], timeout_s: float | None) -> Any:
        if self.watchdog is None:
            return action()
        self.watchdog.arm(self.timeout_s if timeout_s is None else timeout_s)
        try:
            return action()
        finally:
            self.watchdog.disarm()

    def _failure(self, what: str, gone: bool = False) -> HostError:
        if self.watchdog is not None and self.watchdog.expired:
            return HostGone(
                f"the strategy host did not answer within {self.watchdog.expired:g} s "
                "and was stopped"
            )
        return HostGone(what) if gone else HostError(what)

    def send(
        self, message: dict[str, Any], timeout_s: float | None = None, answered: bool = True
    ) -> None:
        """Send a request without waiting for its answer (answers come back in order); `answered`
        False: a frame the host reads inside the request before it (a decision's book), no
        answer."""
        frame = wire.encode(message)
        try:
            self._guarded(lambda: wire.write_frame(self.write_fd, frame), timeout_s)
        except (wire.WireError, OSError) as exc:
            raise self._failure(f"could not send to the strategy host: {exc}", True) from None
        self.pending += answered

    def send_with_fd(
        self, message: dict[str, Any], passed: int, timeout_s: float | None = None
    ) -> None:
        """Send a request with a file descriptor attached (the channel is a UNIX socket)."""
        frame = wire.encode(message)
        try:
            self._guarded(lambda: wire.send_fd(self.write_fd, frame, passed), timeout_s)
        except (wire.WireError, OSError) as exc:
            raise self._failure(f"could not send to the strategy host: {exc}", True) from None
        self.pending += 1

    def receive(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The next answer; StrategyError when it is an error, HostError when there is none."""
        try:
            answer: dict[str, Any] = self._guarded(lambda: self.reader.read(self.limit), timeout_s)
        except (EOFError, ConnectionResetError):  # reset: it died with requests left unread
            raise self._failure(
                "the strategy host closed its channel (it exited or was killed)", True
            ) from None
        except (wire.WireError, OSError) as exc:
            raise self._failure(f"bad answer from the strategy host: {exc}") from None
        self.pending -= 1
        if "error" in answer:
            raise remote_error(answer["error"])
        return answer

    def request_raw(
        self, message: dict[str, Any], timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Send and return the answer as it came, an error answer included (the relay's
        forwarding)."""
        self.send(message, timeout_s)
        try:
            answer: dict[str, Any] = self._guarded(lambda: self.reader.read(self.limit), timeout_s)
        except (EOFError, ConnectionResetError):  # reset: it died with requests left unread
            raise self._failure(
                "the strategy host closed its channel (it exited or was killed)", True
            ) from None
        except (wire.WireError, OSError) as exc:
            raise self._failure(f"bad answer from the strategy host: {exc}") from None
        self.pending -= 1
        return answer

    def request(self, message: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send and wait for this request's answer (after any still pending)."""
        self.send(message, timeout_s)
        while self.pending > 1:
            self.receive(timeout_s)
        return self.receive(timeout_s)


class Watchdog:
    """Calls `on_timeout` once when an armed wait lasts longer than its timeout (checked 4 times a
    second: arming costs no wake-up, so the hot path stays a blocking read)."""

    def __init__(self, on_timeout: Callable[[], None]) -> None:
        self.on_timeout = on_timeout
        self.started: float | None = None
        self.limit = 0.0
        self.expired = 0.0
        self.stopped = False
        threading.Thread(target=self._watch, daemon=True).start()

    def arm(self, timeout_s: float) -> None:
        self.limit, self.started = timeout_s, time.monotonic()

    def disarm(self) -> None:
        self.started = None

    def stop(self) -> None:
        self.stopped = True

    def _watch(self) -> None:
        while not self.stopped:
            time.sleep(0.25)
            started = self.started
            if started is not None and time.monotonic() - started > self.limit and not self.expired:
                self.expired = self.limit
                self.on_timeout()
