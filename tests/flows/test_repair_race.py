"""Two `oomrl repair` processes and a `repair` flow run of one account at once: one claim for every
path, so exactly one promotes; the others wait for it and then stop by name (the account no longer
trades the version their alert was about)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from oomrl.portfolio.ledger import Ledger
from oomrl.repair import promotion
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.agent.conftest import daily_momentum_autopsy, repair_home, sample_data  # noqa: F401
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _cli_repair(home: Path, autopsy: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOMRL_")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestration",
            "repair",
            "--autopsy",
            str(autopsy),
            "--auto-approve",
            "--provider",
            "offline",
            "--wait",
            "3600",
            "--probation",
            "0",
        ],
        cwd=REPO_ROOT,
        text=True,
        env={**env, "OOMRL_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_two_cli_repairs_and_a_flow_repair_of_one_account_promote_exactly_once(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    from flows.repair import outcome_of, repair

    autopsy = tmp_path / "autopsy.json"
    autopsy.write_text(json.dumps(daily_momentum_autopsy))
    flow: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: flow.update(
            state=repair(
                daily_momentum_autopsy, auto_approve=True, provider="offline", return_state=True
            )
        )
    )
    clis = [_cli_repair(repair_home, autopsy) for _ in range(2)]
    thread.start()
    answers = [process.communicate(timeout=3600) for process in clis]
    thread.join(3600)

    outcomes = [
        ("promoted" if p.returncode == 0 else "stopped", out + err)
        for p, (out, err) in zip(clis, answers, strict=True)
    ]
    state = flow["state"]
    outcomes.append(("promoted" if state.name == "Promoted" else "stopped", str(outcome_of(state))))
    assert [kind for kind, _ in outcomes].count("promoted") == 1, outcomes
    for kind, text in outcomes:
        # It waited for the winner, then saw its version was no longer the account's
        if kind == "stopped":
            assert "Traceback" not in text
            assert (
                "account paper now trades v2" in text
                and "promoted while this repair waited" in text
            ), text
    if state.name != "Promoted":
        assert state.is_failed() and state.name == "Superseded"

    settings = get_settings()
    versions = StrategyVersions(settings.store.workspace_dir, Ledger(settings.ledger_url))
    assert [v.tag for v in versions.list()] == ["v1", "v2"]  # one promotion, on the branch
    assert versions.head() == versions.resolve("v2") == versions.ledger.active_version("paper")  # type: ignore[union-attr]
    assert promotion.check(versions) == []
