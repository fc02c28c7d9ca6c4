"""The stack under test: the database it runs on, and what `prefect deploy --all` made of
prefect.yaml."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from oomrl import __version__
from orchestration.stack import read_state
from tests.e2e.conftest import REPO, Stack

pytestmark = pytest.mark.e2e


def test_server_database_follows_the_configuration(stack: Stack) -> None:
    state = read_state(stack.config.home)
    assert state is not None
    if os.environ.get("OOMRL_TEST_POSTGRES_URL"):
        assert str(state["database"]).startswith("127.0.0.1") or "oomrl_e2e_" in str(
            state["database"]
        )
        assert stack.config.database.startswith("postgresql+asyncpg://")
    else:
        assert stack.config.database.startswith("sqlite+aiosqlite:///")
    assert stack.api.get("/health").json() is True


def test_deployments_carry_the_git_sha_pool_and_trigger(stack: Stack) -> None:
    found = {d["name"]: d for d in stack.deployments()}
    assert set(found) == {
        "daily-chain",
        "ingest-daily",
        "rebalance-weekly",
        "attribution-daily",
        "probation-review",
        "repair",
    }
    for deployment in found.values():
        version = re.fullmatch(
            re.escape(__version__) + r"\+([0-9a-f]{12})", deployment["version"]
        )  # package+SHA
        assert version, deployment["version"]
        sha = version.group(1)
        # The checkout's SHA when it was deployed: HEAD, or an ancestor if commits landed since.
        assert (
            subprocess.run(
                ["git", "merge-base", "--is-ancestor", sha, "HEAD"], cwd=REPO, check=False
            ).returncode
            == 0
        )
        assert deployment["work_pool_name"] == "oomrl-local"
    for name, cron in (("daily-chain", "30 16 * * 1-5"), ("rebalance-weekly", "30 17 * * 5")):
        (schedule,) = found[name]["schedules"]
        assert schedule["active"] is True, name  # on by default, as deployed
        assert (
            schedule["schedule"]["cron"] == cron
            and schedule["schedule"]["timezone"] == "Asia/Shanghai"
        )
    # one repair per account is held in the ledger: no deployment lease to be revoked while paused
    assert found["repair"].get("global_concurrency_limit") is None
    automations = stack.api.post("/automations/filter", json={}).json()
    trigger = [a for a in automations if a["name"] == "oomrl-loss-alert-starts-repair"]
    assert trigger and trigger[0]["trigger"]["expect"] == ["oomrl.loss.alert"]
    match = trigger[0]["trigger"]["match"]
    assert (
        match["oomrl.alert.severity"] == ["warning", "critical"]
        and match["oomrl.repair"] == "requested"
    )
    action = trigger[0]["actions"][0]
    assert action["type"] == "run-deployment" and action["deployment_id"] == found["repair"]["id"]
