"""Private paths under OOMRL_HOME: folders 0700 and files 0600, whatever the process umask."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path | str) -> Path:
    """Create `path` and its missing parents as 0700 folders (existing folders keep their mode); returns it."""
    folder = Path(path)
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:  # created by a concurrent process in the meantime: fine, keep going
            continue
        os.chmod(created, PRIVATE_DIR)  # mkdir's mode is masked by the umask; chmod is not
    return folder


def private_file(path: Path | str) -> Path:
    """Create `path` empty as a 0600 file if it does not exist (parents as 0700 folders); returns it.

    Used before a library creates the file itself (SQLite copies the database file's mode to its
    journal and WAL files, so a private ledger.db keeps them private too).
    """
    target = Path(path)
    private_dir(target.parent)
    try:
        handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return target
    os.fchmod(handle, PRIVATE_FILE)
    os.close(handle)
    return target
