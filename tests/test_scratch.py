"""What killed processes leave in the temp folder is cleared once their owner is gone, and only
then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from guardrails.sandbox.tempdirs import OWNER_NOTE, owned_temp_dir
from oomrl.scratch import SCRATCH_PREFIXES, clear_orphans


@pytest.mark.parametrize("prefix", SCRATCH_PREFIXES)
def test_a_folder_whose_owner_is_gone_is_cleared_and_a_live_ones_is_kept(
    prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # tempfile reads TMPDIR again
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    orphan, ours = owned_temp_dir(prefix), owned_temp_dir(prefix)
    assert orphan.parent == tmp_path and (ours / OWNER_NOTE).read_text().split()[0] != ""
    # A process that ended
    (orphan / OWNER_NOTE).write_text(f"{ended.stdout.strip()} 1.0", encoding="utf-8")
    (orphan / "strategies").mkdir()
    (orphan / "strategies" / "copy.py").write_text("S = 1\n")
    unowned = tmp_path / f"{prefix}older"
    unowned.mkdir()  # no note: an older version's, nothing says whose it is
    cleared = clear_orphans(tmp_path / "runs", tmp_path)
    assert cleared == [orphan.name] and not orphan.exists() and ours.is_dir() and unowned.is_dir()
