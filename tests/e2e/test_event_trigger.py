"""Event mode: the webhook emits `oomrl.loss.alert`; the `repair` deployment's trigger starts a run
with the autopsy from the event payload; it pauses for a person, whose answer (through the API, as
the UI sends it) finishes the run."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orchestration.stack import free_port, start_process, stop_process, wait_http, webhook_argv
from tests.e2e.conftest import AUTOPSY, Stack

pytestmark = pytest.mark.e2e


@pytest.fixture()
def event_webhook(stack: Stack) -> Iterator[str]:
    """A second webhook, in event mode, next to the stack's."""
    from dataclasses import replace

    config = replace(stack.config, webhook_port=free_port())
    env = {**stack.env, "OOMRL_WEBHOOK_MODE": "event"}
    pid = start_process("webhook-event", webhook_argv(config), env, config)
    try:
        wait_http(f"{config.webhook_url}/healthz", pid, "webhook-event", 60, config)
        yield config.webhook_url
    finally:
        stop_process(pid)


def _run_for_alert(stack: Stack, alert_id: str, timeout_s: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run in stack.flow_runs("repair/repair"):
            if (run["parameters"].get("autopsy") or {}).get("alert_id") == alert_id:
                return run
        time.sleep(1)
    pytest.fail(f"no repair run was triggered for {alert_id}")


def test_loss_alert_event_triggers_repair_that_waits_for_a_person(
    stack: Stack, event_webhook: str, alert_account: str
) -> None:
    from oomrl.diagnostics.autopsy import input_json
    from oomrl.repair.inputs import load_autopsy
    from oomrl.webhook.signing import sign

    autopsy = json.loads(AUTOPSY.read_text())
    autopsy["alert_id"] = f"e2e-event-{secrets.token_hex(6)}"
    body = json.dumps(autopsy).encode()
    response = httpx.post(
        f"{event_webhook}/hooks/loss-alert",
        content=body,
        timeout=30,
        headers={"Content-Type": "application/json", **sign(body, stack.secret)},
    )
    assert response.status_code == 202, response.text
    assert response.json()["event_id"] and response.json()["flow_run_id"] is None

    run = _run_for_alert(stack, autopsy["alert_id"])
    # A dict (not a string), as validated
    assert run["parameters"]["autopsy"] == input_json(load_autopsy(autopsy))
    assert run["parameters"].get("auto_approve", False) is False
    paused = stack.wait_for(
        run["id"], {"PAUSED", "COMPLETED", "FAILED", "CRASHED", "CANCELLED"}, 150
    )
    assert paused["state_type"] == "PAUSED", paused["state"]
    # The trigger sets none; the flow tags itself
    assert f"alert:{autopsy['alert_id']}" in paused["tags"]

    stack.resume(run["id"], {"decision": "reject", "reason": "e2e reviewer says no"})
    done = stack.wait_for(run["id"], timeout_s=120)
    assert done["state_type"] == "COMPLETED", done["state"]
    outcomes = [
        json.loads(path.read_text())
        for path in (stack.config.home / "runs").glob("repair-*/outcome.json")
    ]
    assert any(
        o["status"] == "rejected" and "e2e reviewer says no" in o["reason"] for o in outcomes
    )
