"""Retry conditions shared by the tasks: repeat infrastructure failures, never a refusal or bad input."""

from __future__ import annotations

from typing import Any

from oomrl.errors import OomrlError


def unless_refused(task: Any, task_run: Any, state: Any) -> bool:
    """Retry anything but an OomrlError (halted account, bad data, conflicts): those are final answers."""
    try:
        state.result()
    except OomrlError:
        return False
    except Exception:  # noqa: BLE001 - anything else (database, disk, network) may be transient
        return True
    return False
