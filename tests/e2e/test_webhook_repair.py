"""A signed loss alert through the real webhook starts a `repair` run that promotes; every bad
request gets its status and starts nothing; a re-delivery of the promoted alert is a duplicate."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e


def test_signed_alert_runs_repair_to_completion(
    stack: Stack, completed_repair: dict[str, Any]
) -> None:
    run = completed_repair["run"]
    # The alert's account (paper) starts from its own version, whatever other tests promoted before.
    assert (run["state_type"], run["state_name"]) == ("COMPLETED", "Promoted"), run["state"]
    repair = stack.deployment("repair/repair")
    assert run["deployment_id"] == repair["id"]
    assert run["parameters"]["auto_approve"] is True
    assert run["parameters"]["autopsy"]["alert_id"] == completed_repair["autopsy"]["alert_id"]
    assert run["idempotency_key"] == f"oomrl-alert-{completed_repair['autopsy']['alert_id']}"
    # The repair ran through the gate: its outcome sits in the run folder under OOMRL_HOME.
    outcomes = list((stack.config.home / "runs").glob("repair-*/outcome.json"))
    assert outcomes, "the repair wrote no outcome"
    statuses = {json.loads(path.read_text())["status"] for path in outcomes}
    assert statuses <= {"promoted", "rejected", "failed"} and statuses


def test_rejected_requests_start_no_run(stack: Stack, completed_repair: dict[str, Any]) -> None:
    before = stack.flow_run_count()
    fresh = json.dumps({**completed_repair["autopsy"], "alert_id": "e2e-never-started"}).encode()
    forged = stack.post_signed("/hooks/loss-alert", fresh, secret="not-the-shared-secret-at-all")
    stale = stack.post_signed("/hooks/loss-alert", fresh, timestamp=int(time.time()) - 301)
    oversized_body = json.dumps({"alert_id": "e2e-big", "pad": "x" * 70_000}).encode()
    oversized = stack.post_signed("/hooks/loss-alert", oversized_body)
    malformed = stack.post_signed("/hooks/loss-alert", b'{"alert_id": ')
    no_id = stack.post_signed("/hooks/loss-alert", b'{"account": "paper"}')
    assert [r.status_code for r in (forged, stale, oversized, malformed, no_id)] == [
        401,
        401,
        413,
        422,
        422,
    ]
    assert stack.flow_run_count() == before
    replayed = stack.post_signed("/hooks/loss-alert", completed_repair["body"])
    # It was promoted (a decision was made): a duplicate, pointing at that run. A failed run's alert
    # starts it again instead (tests/webhook/test_deliveries.py; killed runs:
    # test_approvals_and_redelivery).
    assert replayed.status_code == 200 and replayed.json()["duplicate"] is True, replayed.text
    assert replayed.json()["flow_run_id"] == completed_repair["response"]["flow_run_id"]
