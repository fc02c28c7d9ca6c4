"""Who owns a lock, a claim or a journal: host, pid and the process's start time.

Its death tells a live owner from a dead one, not the age of what it left. A pid alone is not
an identity: the kernel reuses pids. With the start time it is, on one host. An owner on another
host cannot be checked from here. Callers fall back on its heartbeat.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import psutil

# A start time is boot time + ticks since boot. /proc/stat's boot time is whole seconds.
# They move when the wall clock is adjusted. So the same process can read a second apart.
# A reused pid still differs in its start by more than this, or in its command line.
START_TOLERANCE_S = 1.5
HOST = socket.gethostname()


@dataclass(frozen=True)
class Owner:
    """A process by host, pid and start time (psutil's create_time, seconds since the epoch)."""

    host: str
    pid: int
    started: float

    @classmethod
    def me(cls) -> Owner:
        """This process."""
        return cls(HOST, os.getpid(), psutil.Process().create_time())

    @classmethod
    def parse(cls, text: str | None) -> Owner | None:
        """The owner written by `str(owner)`.

        None for text that is not one (an older row, an edited file).
        """
        try:
            host, pid, started = str(text).rsplit(":", 2)
            return cls(host, int(pid), float(started))
        except ValueError:
            return None

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.started:.2f}"

    def alive(self) -> bool | None:
        """True while the process runs, False once it is gone.

        None when it lives on another host.
        """
        if self.host != HOST:
            return None
        try:
            process = psutil.Process(self.pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            return bool(abs(process.create_time() - self.started) <= START_TOLERANCE_S)
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:  # another user's process holds the pid: ours is gone
            return False

    def describe(self) -> str:
        """`pid 123 on host h`, for messages."""
        return f"pid {self.pid} on {self.host}"


def dead(text: str | None) -> bool:
    """Whether the owner written in `text` is known to be gone.

    False when unknown or elsewhere.
    """
    owner = Owner.parse(text)
    return owner is not None and owner.alive() is False
