"""Real `oomrl repair` processes killed for real: one mid-gate (its candidate and the gate's scratch
stay behind), one at its promotion's merge (the branch on an unpromoted commit). The next repair
clears the leftovers, puts the versions back together and promotes normally."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oomrl.portfolio.ledger import Ledger
from oomrl.repair import promotion
from oomrl.repair.promotion import JOURNAL
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.agent.conftest import daily_momentum_autopsy, repair_home, sample_data  # noqa: F401
from tests.conftest import REPO_ROOT

WAIT_S = 600.0  # for the gate to start, on two busy cores


def _env(home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOMRL_")}
    return {**env, "OOMRL_HOME": str(home), "TMPDIR": str(tmp), "PYTHONPATH": str(REPO_ROOT)}


def _repair_argv(autopsy: Path) -> list[str]:
    # --probation 0: what is killed and recovered here is the promotion that activates at once
    return [
        "repair",
        "--autopsy",
        str(autopsy),
        "--auto-approve",
        "--provider",
        "offline",
        "--wait",
        "0",
        "--probation",
        "0",
    ]


def _kill_when_the_gate_runs(home: Path, tmp: Path, autopsy: Path) -> None:
    """Start a repair and SIGKILL its whole process group once its first gate run has made its
    folder."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestration", *_repair_argv(autopsy)],
        cwd=REPO_ROOT,
        env=_env(home, tmp),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + WAIT_S
    # The Critic's probe runs in a gate folder of its own before the candidate exists: wait for
    # both.
    while not (list(tmp.glob("oomrl-gate-*/owner")) and list(home.glob("runs/repair-*/candidate"))):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the repair never reached the gate"
        time.sleep(0.05)  # polling for an event (the folder), not waiting out a duration
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(60)
    if process.stderr:
        process.stderr.close()


def _versions() -> StrategyVersions:
    settings = get_settings()
    return StrategyVersions(settings.store.workspace_dir, Ledger(settings.ledger_url))


@pytest.fixture()
def tmp() -> Iterator[Path]:
    """The repairs' TMPDIR: their own, in the system temp folder (the gate's sandbox user must be
    able to walk to its mount points there, which a pytest temp folder, 0700, would not let it)."""
    folder = Path(tempfile.mkdtemp(prefix="oomrl-kills-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # three real repairs (two of them killed) on two busy cores: minutes
def test_killed_repairs_are_cleared_and_recovered_by_the_next_one(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    tmp: Path,
) -> None:
    home = repair_home
    autopsy = tmp_path / "autopsy.json"
    autopsy.write_text(json.dumps(daily_momentum_autopsy))

    # 1. Killed mid-gate: its candidate, its claim and the gate's scratch folder stay behind.
    _kill_when_the_gate_runs(home, tmp, autopsy)
    (first,) = (home / "runs").glob("repair-*")
    assert (first / "candidate").is_dir() and list(tmp.glob("oomrl-gate-*"))

    # 2. Killed at the merge of its promotion: the branch sits on a commit no version is.
    killed = subprocess.run(
        [sys.executable, "-m", "tests.agent.kill_at", "merge", "oomrl", *_repair_argv(autopsy)],
        cwd=REPO_ROOT,
        env=_env(home, tmp),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (
        "recovered: repairs that were killed left the candidate of " + first.name in killed.stderr
    )
    assert not (first / "candidate").exists() and not list(tmp.glob("oomrl-gate-*"))
    versions = _versions()
    assert (versions.workspace / ".git" / JOURNAL).exists()
    assert versions.head() != versions.resolve("v1") and [v.tag for v in versions.list()] == ["v1"]
    assert versions.ledger.active_version("paper") in (None, versions.resolve("v1"))  # type: ignore[union-attr]

    # 3. The next repair rolls the promotion back, clears the candidate, and promotes v2 normally.
    done = subprocess.run(
        [sys.executable, "-m", "orchestration", *_repair_argv(autopsy)],
        cwd=REPO_ROOT,
        env=_env(home, tmp),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "repair ended Promoted: promoted v2" in done.stdout and "Traceback" not in done.stderr
    assert "recovered: the promotion of v2" in done.stderr and "rolled it back" in done.stderr
    versions = _versions()
    v2 = versions.resolve("v2")
    assert versions.head() == v2 == versions.ledger.active_version("paper")  # type: ignore[union-attr]
    assert promotion.check(versions) == [] and [v.tag for v in versions.list()] == ["v1", "v2"]
    assert not [run for run in (home / "runs").glob("repair-*") if (run / "candidate").exists()]
    assert not list(tmp.glob("oomrl-gate-*")) and not list((home / "runs").glob("*/.owner"))
    # nor the strategy hosts' copies and the jails' stages of the two killed repairs
    assert not [
        p.name for p in tmp.iterdir() if p.name.startswith(("oomrl-host", "oomrl-sandbox-"))
    ]
