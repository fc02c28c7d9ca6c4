"""Retry conditions shared by the tasks: repeat infrastructure failures, never a refusal or bad
input."""

from __future__ import annotations

from typing import Any

from oomrl.errors import OomrlError


def unless_refused(task: Any, task_run: Any, state: Any) -> bool:
    """Retry anything but an OomrlError (halted account, bad data, invalid input).

    Those are final answers. An OomrlError marked transient is retried: source unreachable, a
    ledger conflict.
    """
    try:
        state.result()
    except OomrlError as exc:
        return exc.transient
    except Exception:  # noqa: BLE001 - anything else (database, disk, network) may be transient
        return True
    return False
