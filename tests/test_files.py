"""oomrl.files: folders created 0700 and files 0600 whatever the umask; existing paths are left
alone."""

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


def test_private_file_creates_an_empty_0600_file_and_never_truncates(
    tmp_path: Path, open_umask: object
) -> None:
    path = private_file(tmp_path / "home" / "ledger.db")
    assert path.read_bytes() == b"" and mode(path) == 0o600 and mode(path.parent) == 0o700
    path.write_bytes(b"SQLite format 3")
    assert private_file(path).read_bytes() == b"SQLite format 3"


def test_private_dir_tolerates_a_concurrent_creator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "raced"
    real_mkdir = Path.mkdir

    def raced(self: Path, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        real_mkdir(self, mode)  # another process made it between our exists() check and our mkdir
        raise FileExistsError(str(self))

    monkeypatch.setattr(Path, "mkdir", raced)
    assert private_dir(target).is_dir()


def test_what_oomrl_creates_under_a_new_home_is_private(
    oomrl_home: Path, open_umask: object
) -> None:
    from typer.testing import CliRunner

    from oomrl.ops.cli import app
    from oomrl.portfolio.ledger import Ledger
    from oomrl.repair.loop import new_run_dir
    from oomrl.settings import get_settings
    from tests.conftest import FIXTURES

    result = CliRunner().invoke(
        app,
        ["ingest", "--source", f"csv:{FIXTURES / 'data' / 'csv_mapped'}", "--universe", "600519"],
    )
    assert result.exit_code == 0, result.output
    settings = get_settings()
    settings.store.ensure_dirs()
    Ledger(settings.ledger_url).create_schema()
    run = new_run_dir(settings.store.runs_dir)
    created = [oomrl_home, *oomrl_home.rglob("*")]
    assert oomrl_home / "ledger.db" in created and run in created and len(created) > 8
    assert {
        path.relative_to(oomrl_home.parent).as_posix(): oct(mode(path))
        for path in created
        if mode(path) != (0o700 if path.is_dir() else 0o600)
    } == {}


def test_a_ledger_and_folders_an_older_version_left_open_are_tightened(
    oomrl_home: Path, open_umask: object
) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    settings = get_settings()
    for folder in (oomrl_home, settings.store.data_dir, settings.store.runs_dir):
        folder.mkdir(mode=0o755, exist_ok=True)
    (oomrl_home / "ledger.db").touch(mode=0o644)
    settings.store.ensure_dirs()
    Ledger(settings.ledger_url).create_schema()
    assert mode(oomrl_home / "ledger.db") == 0o600
    assert mode(settings.store.data_dir) == mode(settings.store.runs_dir) == 0o700
    assert mode(oomrl_home) == 0o755  # OOMRL_HOME itself may be a folder the user chose to share


def test_sqlite_file_names_only_a_real_database_file(tmp_path: Path) -> None:
    from oomrl.files import sqlite_file

    assert sqlite_file(f"sqlite:///{tmp_path}/ledger.db") == tmp_path / "ledger.db"
    assert sqlite_file("sqlite://") is None and sqlite_file("sqlite:///:memory:") is None
    assert sqlite_file("postgresql://localhost/test") is None
