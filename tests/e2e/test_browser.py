"""Headless Debian chromium opens the Prefect UI of the e2e server: the deployments and the completed runs are there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import REPO, Stack

pytestmark = pytest.mark.e2e
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """One headless chromium page load; the UI is a JS app, so give it virtual time to render."""
    assert CHROMIUM is not None
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1440,1000",
            "--virtual-time-budget=15000", *extra, url]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it as root: "
                                             "apt-get install chromium)")
def test_ui_lists_deployments_and_completed_runs(stack: Stack, completed_repair: dict[str, Any],
                                                 tmp_path: Path) -> None:
    deployments = chromium(f"{stack.config.ui_url}/deployments", tmp_path / "p1", "--dump-dom")
    assert deployments.returncode == 0, deployments.stderr[-2000:]
    for name in ("ingest-daily", "rebalance-weekly", "attribution-daily", "cycle", "repair"):
        assert name in deployments.stdout, f"deployment {name} not shown in the UI"

    completed = [run for run in stack.flow_runs("repair/repair") if run["state_type"] == "COMPLETED"]
    assert completed, "no completed repair run on the server"
    runs = chromium(f"{stack.config.ui_url}/runs", tmp_path / "p2", "--dump-dom")
    assert runs.returncode == 0, runs.stderr[-2000:]
    assert any(run["name"] in runs.stdout for run in completed), "the completed repair run is not listed"
    assert "Completed" in runs.stdout

    ARTIFACTS.mkdir(exist_ok=True)
    for page, url in (("deployments", "/deployments"), ("runs", "/runs"),
                      ("repair-run", f"/runs/flow-run/{completed[0]['id']}")):
        shot = ARTIFACTS / f"prefect-ui-{page}.png"
        shot.unlink(missing_ok=True)
        result = chromium(f"{stack.config.ui_url}{url}", tmp_path / f"s-{page}", f"--screenshot={shot}")
        assert result.returncode == 0 and shot.exists() and shot.stat().st_size > 10_000, result.stderr[-2000:]
