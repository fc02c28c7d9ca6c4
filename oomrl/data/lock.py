"""One writer at a time for the market store: an OS file lock and a note naming its holder.

The lock is flock(2) on data/.writer.lock (the `filelock` library). The kernel releases it when its
process exits, however it exits. So a killed ingest never leaves the store locked. The holder
writes data/.writer.json once it has the lock and removes it on release. Finding that note when
taking the lock therefore means the previous writer died mid-write. Its uncommitted files are
orphans to clear.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from filelock import FileLock, Timeout

from oomrl.errors import OomrlError, StoreBusyError
from oomrl.files import PRIVATE_FILE, atomic_write, private_dir

LOCK_FILE = ".writer.lock"
HOLDER_FILE = ".writer.json"
DEFAULT_WAIT_S = 900.0
"""How long a second writer waits for the first by default (a live ingest of the CSI 300 takes
minutes)."""
POLL_S = 0.1


_held = threading.local()
"""Stores whose lock this thread holds: taking one again would wait for itself until the timeout."""


def _held_roots() -> set[Path]:
    if not hasattr(_held, "roots"):
        _held.roots = set()
    return cast(set[Path], _held.roots)


def read_holder(root: Path) -> dict[str, Any] | None:
    """The note of the process holding (or, if it died, last holding) the writer lock.

    None when there is none."""
    try:
        return dict(json.loads((root / HOLDER_FILE).read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, RecursionError):
        return {"pid": "?", "command": "(unreadable note)", "since": "?"}


def describe(holder: dict[str, Any] | None) -> str:
    """`pid 123 (oomrl ingest --source sample) since 2026-01-05T09:00:00+00:00`, for messages."""
    if holder is None:
        return "another process"
    return (
        f"pid {holder.get('pid', '?')} ({holder.get('command', '?')}) since "
        f"{holder.get('since', '?')}"
    )


class WriterLock:
    """Context manager holding the store's writer lock.

    It waits up to `wait` seconds (0: refuse at once)."""

    def __init__(
        self, root: Path, wait: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> None:
        self.root = Path(root)
        self.wait = DEFAULT_WAIT_S if wait is None else max(0.0, float(wait))
        self.on_wait = on_wait
        self.interrupted: dict[str, Any] | None = None
        """The note of a previous writer that died holding the lock (found on acquiring), if any."""
        self._lock: FileLock | None = None

    def __enter__(self) -> Self:
        if self.root.resolve() in _held_roots():
            raise OomrlError(
                f"this thread already holds the writer lock of {self.root}: write through its open "
                "transaction (store.transaction() on the transaction joins it)"
            )
        private_dir(self.root)
        lock = FileLock(
            self.root / LOCK_FILE, mode=PRIVATE_FILE, thread_local=False, fallback_to_soft=False
        )
        try:
            lock.acquire(timeout=0)
        except Timeout:
            holder = read_holder(self.root)
            if self.wait <= 0:
                raise StoreBusyError(
                    f"the market store at {self.root} is being written by {describe(holder)}; "
                    "not waiting (wait is 0): try again when it has finished"
                ) from None
            if self.on_wait:
                self.on_wait(
                    f"waiting up to {self.wait:.0f} s for {describe(holder)} to finish "
                    f"writing {self.root}"
                )
            try:
                lock.acquire(timeout=self.wait, poll_interval=POLL_S)
            except Timeout:
                raise StoreBusyError(
                    f"the market store at {self.root} is still being written by "
                    f"{describe(read_holder(self.root))} after {self.wait:.0f} s; "
                    "try again when it has finished"
                ) from None
        self._lock = lock
        try:
            self.interrupted = read_holder(self.root)
            note = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": " ".join(sys.argv)[:300],
                "since": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            payload = json.dumps(note).encode()
            atomic_write(self.root / HOLDER_FILE, lambda temp: Path(temp).write_bytes(payload))
        except BaseException:
            lock.release()
            raise
        _held_roots().add(self.root.resolve())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self._lock is not None
        try:
            (self.root / HOLDER_FILE).unlink(missing_ok=True)
        finally:
            _held_roots().discard(self.root.resolve())
            self._lock.release()
            self._lock = None
