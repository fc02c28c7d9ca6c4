"""A signed loss alert through the real webhook starts a `repair` run that runs to its end; every bad
request gets its status and starts nothing; a re-delivery is a duplicate unless the run failed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e


def test_signed_alert_runs_repair_to_completion(stack: Stack, completed_repair: dict[str, Any]) -> None:
    run = completed_repair["run"]
    # The flow ran to its own end: Promoted, or an honest Failed when the session already promoted
    # this change (the offline provider cannot write red tests for it twice); never Crashed.
    assert (run["state_type"], run["state_name"]) in {("COMPLETED", "Promoted"), ("FAILED", "Tests rejected")}, \
        run["state"]
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
    assert [r.status_code for r in (forged, stale, oversized, malformed, no_id)] == [401, 401, 413, 422, 422]
    assert stack.flow_run_count() == before
    replayed = stack.post_signed("/hooks/loss-alert", completed_repair["body"])
    first_run = completed_repair["response"]["flow_run_id"]
    if completed_repair["run"]["state_type"] == "COMPLETED":  # a decision was made: a duplicate
        assert replayed.status_code == 200 and replayed.json()["duplicate"] is True, replayed.text
        assert replayed.json()["flow_run_id"] == first_run
    else:  # it failed: the same alert starts it again (docs/operations.md, re-delivery)
        assert replayed.status_code == 202 and replayed.json()["replaces"] == first_run, replayed.text
