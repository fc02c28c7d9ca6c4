"""The one flow version: package version + git SHA, with GIT_SHA standing in outside a checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from oomrl import __version__
from oomrl.build_info import flow_version, git_sha

REPO = Path(__file__).resolve().parent.parent


def test_the_flow_version_is_the_package_version_and_the_checkouts_commit() -> None:
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert flow_version() == f"{__version__}+{head}"
    declared = re.search(r'^version = "(.*)"$', (REPO / "pyproject.toml").read_text(), re.MULTILINE)
    assert declared and declared.group(1) == __version__  # one version, two places, kept equal


def test_outside_a_checkout_git_sha_stands_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uncached = git_sha.__wrapped__
    monkeypatch.setenv("GIT_SHA", "3f9c2a1b7d4e5f60")
    assert uncached(tmp_path) == "3f9c2a1b7d4e"
    monkeypatch.setenv("GIT_SHA", "not a sha; rm -rf")
    assert uncached(tmp_path) == "unknown"
    monkeypatch.delenv("GIT_SHA")
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert uncached(tmp_path) == "unknown"
    assert re.fullmatch(r"[0-9a-f]{12}|unknown", git_sha())
