"""`oomrl ingest` on a full disk and on a read-only OOMRL_HOME, for real: a small tmpfs and a
read-only bind mount in a bubblewrap mount namespace. The ingest fails with one clear line and the
store is unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.data.test_store_processes import FIRST, SECOND, State, assert_no_orphans, clean_ingests

pytestmark = pytest.mark.slow
BWRAP = shutil.which("bwrap")
TMPFS_BYTES = 4 * 1024 * 1024
FREE_AFTER_FILL = 24 * 1024
"""Room left on the full disk: enough to take the lock and start writing, not to finish."""

# Runs inside the sandbox, where OOMRL_HOME is a fresh small tmpfs; `out` is a real folder outside
# it.
DISK_FULL_SCRIPT = textwrap.dedent("""
    import json, os, shutil, subprocess, sys
    home, out = sys.argv[1], sys.argv[2]
    first, second = json.loads(sys.argv[3]), json.loads(sys.argv[4])
    oomrl = [sys.executable, "-m", "orchestration", "ingest"]

    def run(subset):
        args = [f"--{name}={value}" for name, value in subset.items()]
        done = subprocess.run(oomrl + args, capture_output=True, text=True)
        return {"code": done.returncode, "output": done.stdout + done.stderr}

    results = {"first": run(first)}
    stat = os.statvfs(home)
    with open(os.path.join(home, "filler"), "wb") as filler:
        filler.write(b"x" * (stat.f_bavail * stat.f_frsize - FREE_AFTER_FILL))
    results["full"] = run(second)
    shutil.copytree(os.path.join(home, "data"), os.path.join(out, "after-full"))
    os.remove(os.path.join(home, "filler"))
    results["again"] = run(second)
    shutil.copytree(os.path.join(home, "data"), os.path.join(out, "after-again"))
    print(json.dumps(results))
""").replace("FREE_AFTER_FILL", str(FREE_AFTER_FILL))


def sandboxed(
    mounts: list[str], command: list[str], home: Path
) -> subprocess.CompletedProcess[str]:
    """Run `command` with the whole file system as is, plus `mounts`, in a new mount namespace."""
    assert BWRAP is not None
    env = {**os.environ, "OOMRL_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [BWRAP, "--dev-bind", "/", "/", *mounts, "--", *command],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )


def require_namespaces(tmp_path: Path) -> None:
    probe = sandboxed(["--tmpfs", str(tmp_path)], ["true"], tmp_path)
    if probe.returncode != 0:  # pragma: no cover - a machine without user or mount namespaces
        pytest.skip(f"bubblewrap cannot create a mount namespace here: {probe.stderr.strip()}")


@pytest.mark.skipif(
    BWRAP is None, reason="bubblewrap (bwrap) is not installed; `make test` installs it"
)
def test_a_full_disk_fails_the_ingest_and_keeps_the_last_complete_store(tmp_path: Path) -> None:
    require_namespaces(tmp_path)
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    script = [
        sys.executable,
        "-c",
        DISK_FULL_SCRIPT,
        str(home),
        str(out),
        json.dumps(FIRST),
        json.dumps(SECOND),
    ]
    done = sandboxed(["--size", str(TMPFS_BYTES), "--tmpfs", str(home)], script, home)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["first"]["code"] == 0, results["first"]["output"]
    full = results["full"]
    assert full["code"] == 1 and "Traceback" not in full["output"], full["output"]
    assert "error: cannot write the market store at" in full["output"]
    assert "No space left on device" in full["output"] and "nothing was changed" in full["output"]
    before = clean_ingests(tmp_path / "first", FIRST)
    after_full = State.of(out / "after-full")
    assert after_full.same_data(before) and after_full.ingests == 1
    assert_no_orphans(
        out / "after-full"
    )  # the failed ingest's files were removed, freeing the space
    assert results["again"]["code"] == 0, results["again"]["output"]
    assert State.of(out / "after-again").same_data(clean_ingests(tmp_path / "both", FIRST, SECOND))


@pytest.mark.skipif(
    BWRAP is None, reason="bubblewrap (bwrap) is not installed; `make test` installs it"
)
@pytest.mark.parametrize("with_store", [True, False], ids=["holding-a-store", "empty"])
def test_a_read_only_home_fails_the_ingest_with_one_line(tmp_path: Path, with_store: bool) -> None:
    require_namespaces(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    if with_store:
        clean_ingests(home / "data", FIRST)
    files = sorted(path.relative_to(home) for path in home.rglob("*"))
    args = [f"--{name}={value}" for name, value in SECOND.items()]
    done = sandboxed(
        ["--ro-bind", str(home), str(home)],
        [sys.executable, "-m", "orchestration", "ingest", *args],
        home,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in output, output
    assert (
        f"error: cannot write the market store at {home / 'data'}: Read-only file system" in output
    )
    assert sorted(path.relative_to(home) for path in home.rglob("*")) == files
