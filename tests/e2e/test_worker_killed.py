"""Killing the worker (and its flow run) during a rebalance, then retrying the run, leaves one set of fills."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e
ACCOUNT = "e2e-kill"
SESSION = "2024-07-05"


def test_retry_after_worker_death_books_fills_once(stack: Stack) -> None:
    from oomrl.config import get_settings
    from oomrl.portfolio.ledger import Ledger

    run_id = stack.run_deployment("weekly-rebalance/rebalance-weekly", {"account": ACCOUNT, "as_of": SESSION})
    stack.wait_for(run_id, {"RUNNING"} | {"COMPLETED", "FAILED", "CRASHED"}, timeout_s=120)
    killed = stack.kill_worker()
    assert len(killed) >= 2, "the flow run process was not under the worker"
    # What Prefect's missing-heartbeat automation does, then what Retry in the UI does.
    if stack.flow_run(run_id)["state_type"] == "RUNNING":
        stack.set_state(run_id, "CRASHED", "Crashed", "worker killed during the rebalance")
    stack.set_state(run_id, "SCHEDULED", "AwaitingRetry", "retried after the worker died")
    stack.restart_worker()
    run = stack.wait_for(run_id, timeout_s=150)
    assert run["state_type"] == "COMPLETED", run["state"]
    assert run["run_count"] >= 1

    ledger = Ledger(get_settings(home=stack.config.home, ledger_url=None).ledger)
    fills = ledger.fills_frame(ACCOUNT)
    assert len(fills) > 0
    assert set(fills["date"].astype(str)) == {SESSION}
    assert not fills.duplicated(["date", "symbol", "side"]).any()
    assert ledger.reconcile(ACCOUNT) == []
    assert len(ledger.nav_frame(ACCOUNT)) == 1
