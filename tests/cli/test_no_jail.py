"""No jail, no strategy code: where bubblewrap cannot run, a replay refuses unless the unsafe
setting allows it, and then every output says the strategy ran unjailed.

The machine without bubblewrap is made for real: the command runs in its own mount namespace where
/usr/bin/bwrap is covered by an empty file, so the gate's probe of the sandbox fails as it would on
a host that lacks it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oomrl.portfolio.hosting import UNSAFE_JAIL

BWRAP = shutil.which("bwrap")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or BWRAP is None or shutil.which("unshare") is None,
        reason="hiding bubblewrap needs root, unshare and an installed bwrap",
    ),
]


def without_bwrap(home: Path, *args: str, unsafe: bool) -> subprocess.CompletedProcess[str]:
    """`oomrl ARGS` with bubblewrap hidden from it (its own mount namespace)."""
    assert BWRAP is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOMRL_")}
    env["OOMRL_HOME"] = str(home)
    if unsafe:
        env["OOMRL_UNSAFE_NO_JAIL"] = "1"
    command = [sys.executable, "-m", "orchestration", *args]
    script = f"mount --bind /dev/null {BWRAP} && exec " + " ".join(f"'{c}'" for c in command)
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


REPLAY = (
    "replay",
    "--strategy",
    "daily_momentum",
    "--start",
    "2024-07-01",
    "--end",
    "2024-07-12",
    "--json",
)


def test_without_a_jail_strategy_code_does_not_run(home: Path) -> None:
    done = without_bwrap(home, *REPLAY, unsafe=False)
    assert done.returncode == 1, done.stderr
    assert (
        "strategy code runs only in a jail" in done.stderr and "OOMRL_UNSAFE_NO_JAIL" in done.stderr
    )
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_the_unsafe_setting_runs_it_unjailed_and_every_output_says_so(home: Path) -> None:
    done = without_bwrap(home, *REPLAY, unsafe=True)
    assert done.returncode == 0, done.stderr
    assert f"strategy code ran unjailed: jail {UNSAFE_JAIL}" in done.stderr
    (summary,) = json.loads(done.stdout)
    assert summary["jail"] == UNSAFE_JAIL and summary["rebalances"] > 0
