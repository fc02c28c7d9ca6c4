"""What a killed repair leaves behind, cleared by the next repair once its maker is gone.

It leaves its candidate clone (runs/<id>/candidate). It leaves the scratch folders of its gate runs
and offline author ($TMPDIR/oomrl-gate-*, oomrl-author-*).

Each such folder carries a note of its owner, `<pid> <unix time it was made>`. A folder whose owner
runs no more is an orphan. Either no process has that pid, or one started after the note. A folder
without a note (an older version's) is left alone: nothing says whose it is.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil

from guardrails.sandbox import OWNER_NOTE
from oomrl.owners import START_TOLERANCE_S

RUN_NOTE = ".owner"  # in a repair's run folder while its process works in it.
# The gate's runs, the offline author, and the strategy hosts' copies, homes and jail stages.
SCRATCH_PREFIXES = (
    "oomrl-gate-",
    "oomrl-author-",
    "oomrl-host-",
    "oomrl-hostws-",
    "oomrl-hosthome-",
    "oomrl-sandbox-",
)
logger = logging.getLogger(__name__)


def owner_note() -> str:
    return f"{os.getpid()} {time.time():.3f}"


def note_owner(folder: Path, name: str = OWNER_NOTE) -> Path:
    """Write this process's note into `folder`."""
    (folder / name).write_text(owner_note(), encoding="utf-8")
    return folder


def scratch_dir(prefix: str) -> Path:
    """A fresh private temp folder with this process's note in it."""
    return note_owner(Path(tempfile.mkdtemp(prefix=prefix)))


def gone(note: Path) -> bool:
    """Whether the process a note names has ended (False when the note cannot be read)."""
    try:
        pid_text, made_text = note.read_text(encoding="utf-8").split()
        pid, made = int(pid_text), float(made_text)
    except (OSError, ValueError):
        return False
    try:
        # The pid was reused since
        return bool(psutil.Process(pid).create_time() > made + START_TOLERANCE_S)
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:  # another user's process holds the pid now
        return True


def clear_orphans(runs_dir: Path, temp_dir: Path | None = None) -> list[str]:
    """Remove the candidates and scratch folders of repairs whose process died; what was removed."""
    cleared = []
    for note in sorted(runs_dir.glob(f"*/{RUN_NOTE}")) if runs_dir.is_dir() else ():
        if gone(note):
            run = note.parent
            shutil.rmtree(run / "candidate", ignore_errors=True)
            note.unlink(missing_ok=True)
            cleared.append(f"the candidate of {run.name}")
    root = temp_dir or Path(tempfile.gettempdir())
    for prefix in SCRATCH_PREFIXES:
        for folder in sorted(root.glob(f"{prefix}*")):
            if folder.is_dir() and not folder.is_symlink() and gone(folder / OWNER_NOTE):
                shutil.rmtree(folder, ignore_errors=True)
                cleared.append(folder.name)
    if cleared:
        logger.warning("recovered: repairs that were killed left %s; removed", ", ".join(cleared))
    return cleared
