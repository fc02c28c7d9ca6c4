"""The repair in operation on a real Prefect server: the docs' webhook example reaches approval; a
paused repair survives a long wait and promotes when approved, another times out into Rejected; a
repair whose worker was killed is restarted by re-delivering its alert; refused, rejected and failed
repairs are each named as such in the runs list, with their reason as an artifact.

Each test that promotes has an account of its own: a repair starts from its account's active version
(`StrategyVersions.base_for`; v1 for a new account), so another test's promotion of the same change
earlier in the session does not change what this one finds, and the tests pass in any order."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pytest

from tests.e2e.conftest import AUTOPSY, Stack
from tests.e2e.stacks import send_docs_example

pytestmark = pytest.mark.e2e
PAUSE_HELD_S = 6 * 60  # the bar: a paused repair survives at least this long
ANY_END = {"PAUSED", "COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _alert(alert_id: str, **changes: Any) -> bytes:
    autopsy = json.loads(AUTOPSY.read_text())
    autopsy.update(alert_id=alert_id, **changes)
    return json.dumps(autopsy).encode()


def _open_account(stack: Stack, account: str) -> str:
    from oomrl.portfolio.service import open_ledger
    from oomrl.settings import get_settings

    ledger = open_ledger(get_settings(store={"home": stack.config.home}))
    if account not in ledger.account_names():
        ledger.open_account(account, 10_000_000)
    return account


def _post(stack: Stack, url: str, body: bytes) -> Any:
    """Deliver a signed alert as a polite sender does: a 503 (Prefect busy) is retried, signed
    afresh."""
    import httpx

    from oomrl.webhook.signing import sign

    for attempt in range(8):
        answer = httpx.post(
            f"{url}/hooks/loss-alert",
            content=body,
            timeout=60,
            headers={"Content-Type": "application/json", **sign(body, stack.secret)},
        )
        if answer.status_code != 503:
            break
        time.sleep(min(2**attempt, 15))
    return answer


def _outcome_artifact(stack: Stack, run_id: str) -> str:
    found = stack.api.post(
        "/artifacts/filter",
        json={
            "artifacts": {"flow_run_id": {"any_": [run_id]}, "key": {"any_": ["repair-outcome"]}}
        },
    )
    found.raise_for_status()
    (artifact,) = found.json()
    return str(artifact["data"])


def test_the_docs_webhook_example_verbatim_starts_a_repair_that_reaches_approval(
    stack: Stack, alert_account: str
) -> None:
    with stack.webhook(OOMRL_WEBHOOK_AUTO_APPROVE="false") as url:
        answer = send_docs_example(stack, url)
    assert answer["alert_id"] == "ops-1" and answer["duplicate"] is False, answer
    run = stack.wait_for(answer["flow_run_id"], ANY_END, timeout_s=300)
    assert run["state_type"] == "PAUSED", run["state"]  # the mandate waits for a person
    stack.resume(run["id"], {"decision": "reject", "reason": "e2e: docs example checked"})
    done_run = stack.wait_for(run["id"], timeout_s=120)
    assert (done_run["state_type"], done_run["state_name"]) == ("COMPLETED", "Rejected"), done_run[
        "state"
    ]


def test_refused_rejected_and_failed_repairs_are_named_in_the_runs_list(
    stack: Stack, alert_account: str
) -> None:
    account = _open_account(stack, "e2e-states")
    # Refused: the run's own door (the webhook would have said 422; the UI and triggers reach the
    # flow).
    refused = stack.run_deployment(
        "repair/repair",
        {"autopsy": {"alert_id": "e2e-refused", "account": "ghost"}, "auto_approve": True},
    )
    # Failed: a mandate the offline Coder cannot meet, so its patch is rejected by the gate.
    impossible = json.loads(_alert("x"))["constraints"] | {"max_weekly_turnover": 0.01}
    failing = _post(
        stack,
        stack.config.webhook_url,
        _alert(f"e2e-fail-{secrets.token_hex(4)}", account=account, constraints=impossible),
    )
    assert failing.status_code == 202, failing.text
    # Rejected: a person says no.
    with stack.webhook(OOMRL_WEBHOOK_AUTO_APPROVE="false") as url:
        asked = _post(stack, url, _alert(f"e2e-reject-{secrets.token_hex(4)}", account=account))
    assert asked.status_code == 202, asked.text
    rejected = asked.json()["flow_run_id"]
    assert stack.wait_for(rejected, ANY_END, timeout_s=300)["state_type"] == "PAUSED"
    stack.resume(rejected, {"decision": "reject", "reason": "e2e reviewer says no"})

    ends = {
        name: stack.wait_for(run_id, timeout_s=300)
        for name, run_id in (
            ("refused", refused),
            ("failed", failing.json()["flow_run_id"]),
            ("rejected", rejected),
        )
    }
    seen = {name: (run["state_type"], run["state_name"]) for name, run in ends.items()}
    assert seen == {
        "refused": ("FAILED", "Refused"),
        "failed": ("FAILED", "Patch rejected"),
        "rejected": ("COMPLETED", "Rejected"),
    }, {n: r["state"] for n, r in ends.items()}
    # The runs list (filtered by state name, as the UI does) shows each as such, never as a
    # promotion.
    for name, state_name in (
        ("refused", "Refused"),
        ("failed", "Patch rejected"),
        ("rejected", "Rejected"),
    ):
        listed = stack.api.post(
            "/flow_runs/filter",
            json={"flow_runs": {"state": {"name": {"any_": [state_name]}}}, "limit": 200},
        ).json()
        assert ends[name]["id"] in {run["id"] for run in listed}
        assert ends[name]["state_name"] != "Promoted"
    assert "unknown account 'ghost'" in ends["refused"]["state"]["message"]
    assert "unknown account 'ghost'" in _outcome_artifact(stack, refused)
    assert "logic-genesis" in ends["failed"]["state"]["message"]
    assert "Repair failed" in _outcome_artifact(stack, ends["failed"]["id"])
    assert "e2e reviewer says no" in _outcome_artifact(stack, rejected)


@pytest.fixture(scope="session")
def held_pause(stack: Stack, alert_account: str) -> dict[str, Any]:
    """A repair Paused for a person and another whose reviewer has 60 s, posted early in the
    session. The check that the first is still the same Paused state six minutes on runs after
    every other e2e test that leaves the worker alive, so the wait overlaps their work."""
    account = _open_account(stack, "e2e-paused")
    with (
        stack.webhook(OOMRL_WEBHOOK_AUTO_APPROVE="false") as patient,
        stack.webhook(
            OOMRL_WEBHOOK_AUTO_APPROVE="false", OOMRL_WEBHOOK_APPROVAL_TIMEOUT_S="60"
        ) as hasty,
    ):
        waiting = _post(stack, patient, _alert(f"e2e-wait-{secrets.token_hex(4)}", account=account))
        timing_out = _post(
            stack, hasty, _alert(f"e2e-timeout-{secrets.token_hex(4)}", account=account)
        )
    assert waiting.status_code == 202 and timing_out.status_code == 202, (
        waiting.text,
        timing_out.text,
    )
    paused = stack.wait_for(waiting.json()["flow_run_id"], ANY_END, timeout_s=300)
    return {"paused": paused, "since": time.monotonic(), "timing_out": timing_out.json()}


def test_a_repair_that_needs_a_person_waits_paused(held_pause: dict[str, Any]) -> None:
    paused = held_pause["paused"]
    assert paused["state_type"] == "PAUSED", paused["state"]


@pytest.mark.slow
@pytest.mark.after_long_hold
def test_a_paused_repair_waits_six_minutes_then_promotes_and_another_times_out_rejected(
    stack: Stack, held_pause: dict[str, Any]
) -> None:
    paused = held_pause["paused"]
    assert paused["state_type"] == "PAUSED", paused["state"]
    # The second one: nobody answers within its 60 s, so it ends Rejected (not Failed, not Crashed).
    ended = stack.wait_for(held_pause["timing_out"]["flow_run_id"], timeout_s=400)
    assert (ended["state_type"], ended["state_name"]) == ("COMPLETED", "Rejected"), ended["state"]
    assert "timeout rejects" in ended["state"]["message"]
    assert "timeout rejects" in _outcome_artifact(stack, ended["id"])

    # The first: still the very same Paused state after six minutes. A state's id changes with
    # every transition, so an unchanged id means nothing crashed, resumed or re-paused it meanwhile.
    run_id = paused["id"]
    while time.monotonic() - held_pause["since"] < PAUSE_HELD_S:
        time.sleep(15)
        now = stack.flow_run(run_id)
        assert now["state"]["id"] == paused["state"]["id"], now["state"]
    now = stack.flow_run(run_id)
    assert now["state"]["id"] == paused["state"]["id"], now["state"]
    stack.resume(run_id, {"decision": "approve", "reason": "e2e: approved after six minutes"})
    done = stack.wait_for(run_id, timeout_s=600)
    assert (done["state_type"], done["state_name"]) == ("COMPLETED", "Promoted"), done["state"]
    assert "promoted v" in done["state"]["message"]


@pytest.mark.kills_worker
def test_a_repair_whose_worker_was_killed_restarts_when_its_alert_is_delivered_again(
    stack: Stack, alert_account: str
) -> None:
    account = _open_account(stack, "e2e-killed")
    body = _alert(f"e2e-killed-{secrets.token_hex(4)}", account=account)
    first = _post(stack, stack.config.webhook_url, body)
    assert first.status_code == 202, first.text
    run_id = first.json()["flow_run_id"]
    killed = stack.kill_worker(running_flow_run=run_id)
    assert len(killed) >= 2, "the repair's process was not under the worker"
    stack.restart_worker()
    # Prefect does not know yet
    assert stack.flow_run(run_id)["state_type"] in ("PENDING", "RUNNING")
    # While its heartbeat is recent the run may still be alive: a re-delivery is a duplicate.
    again = _post(stack, stack.config.webhook_url, body)
    assert again.status_code == 200 and again.json()["flow_run_id"] == run_id, again.text
    # Once the heartbeat has been silent for CLAIM_SILENT_S, the next delivery starts a new run.
    deadline = time.monotonic() + 400
    while again.status_code == 200 and time.monotonic() < deadline:
        time.sleep(10)
        again = _post(stack, stack.config.webhook_url, body)
    assert again.status_code == 202 and again.json()["replaces"] == run_id, again.text
    dead = stack.flow_run(run_id)
    assert dead["state_type"] == "CRASHED" and "no heartbeat" in dead["state"]["message"]
    restarted = stack.wait_for(again.json()["flow_run_id"], timeout_s=400)
    # It ran to its own end from its account's version, with its outcome published.
    assert (restarted["state_type"], restarted["state_name"]) == ("COMPLETED", "Promoted"), (
        restarted["state"]
    )
    assert "Repair" in _outcome_artifact(stack, restarted["id"])
