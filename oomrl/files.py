"""Private paths under OOMRL_HOME (folders 0700, files 0600, whatever the umask) and atomic file
writes."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
SHARED_BITS = stat.S_IRWXG | stat.S_IRWXO


def _tighten(path: Path, mode: int) -> None:
    """Drop group and other permissions from a path this user owns.

    An older version may have left it open.
    """
    info = path.stat()
    if info.st_mode & SHARED_BITS and info.st_uid == os.getuid():
        os.chmod(path, mode)


def private_dir(path: Path | str, tighten: bool = False) -> Path:
    """Create `path` and its missing parents as 0700 folders; returns it.

    Existing folders keep their mode unless `tighten`. Then `path` itself loses group/other access.
    A user's OOMRL_HOME may be a folder they chose to share. But data/ and runs/ are oomrl's own.
    """
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
    if tighten and not missing:
        _tighten(folder, PRIVATE_DIR)
    return folder


def private_file(path: Path | str, tighten: bool = False) -> Path:
    """Create `path` empty as a 0600 file if it does not exist; returns it.

    Parents are made as 0700 folders. Used before a library creates the file itself. SQLite copies
    the database file's mode to its journal and WAL files. So a private ledger.db keeps them private
    too. `tighten` also drops group/other access from an existing file.
    """
    target = Path(path)
    private_dir(target.parent)
    try:
        handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        if tighten:
            _tighten(target, PRIVATE_FILE)
        return target
    os.fchmod(handle, PRIVATE_FILE)
    os.close(handle)
    return target


def sqlite_file(url: str) -> Path | None:
    """The database file of a `sqlite:///...` URL (None for other databases and in-memory
    SQLite)."""
    if not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (a power cut after os.replace must not undo it)."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def atomic_write(path: Path, write: Callable[[str], object], durable: bool = False) -> None:
    """Write via a private temp file in the same folder, fsync, then os.replace.

    Readers see old or new, never half.

    mkstemp creates the file 0600 and os.replace keeps that mode. `durable` also fsyncs the folder,
    for commit points whose rename must survive a power cut.
    """
    private_dir(path.parent)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        write(temp_name)
        with open(temp_name, "rb+") as stream:
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def read_bounded(
    path: Path, limit: int, what: str, error: Callable[[str], Exception], regular: bool = True
) -> bytes:
    """The bytes of the file at `path`, reading at most `limit` (+1 to tell it is larger).

    Raises `error` with a message naming `what` when the file cannot be read or is larger. With
    `regular` it also raises when it is not a regular file. A device such as /dev/zero never ends.
    A FIFO never opens without a writer.
    """
    if regular and path.exists() and not path.is_file():
        raise error(f"{what} is not a regular file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise error(f"{what} is larger than {limit} bytes")
    return raw
