"""Killing the worker (and its flow run) during a rebalance, then retrying the run, leaves one set
of fills."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e
ACCOUNT = "e2e-kill"
SESSION = "2024-07-05"


@pytest.mark.kills_worker
def test_retry_after_worker_death_books_fills_once(stack: Stack) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    run_id = stack.run_deployment(
        "weekly-rebalance/rebalance-weekly", {"account": ACCOUNT, "as_of": SESSION}
    )
    # Kill as soon as the worker has spawned the flow-run process: it dies before or while
    # rebalancing.
    killed = stack.kill_worker(running_flow_run=run_id)
    assert len(killed) >= 2, "the flow run process was not under the worker"
    interrupted = stack.flow_run(run_id)
    assert interrupted["state_type"] in ("PENDING", "RUNNING"), interrupted["state"]
    # What Prefect's missing-heartbeat automation does, then what Retry in the UI does.
    stack.set_state(run_id, "CRASHED", "Crashed", "worker killed during the rebalance")
    stack.set_state(run_id, "SCHEDULED", "AwaitingRetry", "retried after the worker died")
    stack.restart_worker()
    run = stack.wait_for(run_id, timeout_s=150)
    assert run["state_type"] == "COMPLETED", run["state"]
    assert run["run_count"] >= 1

    ledger = Ledger(
        get_settings(store={"home": stack.config.home}, ledger={"url": None}).ledger_url
    )
    fills = ledger.fills_frame(ACCOUNT)
    assert len(fills) > 0
    assert set(fills["date"].astype(str)) == {SESSION}
    assert not fills.duplicated(["date", "symbol", "side"]).any()
    assert ledger.reconcile(ACCOUNT) == []
    assert len(ledger.nav_frame(ACCOUNT)) == 1
