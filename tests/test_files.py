"""oomrl.files: folders created 0700 and files 0600 whatever the umask; existing paths are left alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from oomrl.files import private_dir, private_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture()
def open_umask() -> object:
    """The usual umask (022), under which plain mkdir and open give world-readable paths."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_private_dir_creates_every_missing_level_0700(tmp_path: Path, open_umask: object) -> None:
    (tmp_path / "kept").mkdir(mode=0o755)
    made = private_dir(tmp_path / "kept" / "a" / "b")
    assert made == tmp_path / "kept" / "a" / "b" and made.is_dir()
    assert mode(tmp_path / "kept" / "a") == mode(made) == 0o700
    assert mode(tmp_path / "kept") == 0o755  # an existing folder keeps the mode its owner gave it
    assert private_dir(made) == made  # idempotent


def test_private_file_creates_an_empty_0600_file_and_never_truncates(tmp_path: Path, open_umask: object) -> None:
    path = private_file(tmp_path / "home" / "ledger.db")
    assert path.read_bytes() == b"" and mode(path) == 0o600 and mode(path.parent) == 0o700
    path.write_bytes(b"SQLite format 3")
    assert private_file(path).read_bytes() == b"SQLite format 3"


def test_private_dir_tolerates_a_concurrent_creator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "raced"
    real_mkdir = Path.mkdir

    def raced(self: Path, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        real_mkdir(self, mode)  # another process made it between our exists() check and our mkdir
        raise FileExistsError(str(self))

    monkeypatch.setattr(Path, "mkdir", raced)
    assert private_dir(target).is_dir()
