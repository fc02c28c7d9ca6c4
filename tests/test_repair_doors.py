"""Every door of the repair refuses one malformed autopsy once, naming the problem, and writes
nothing: no run folder, no claim, no delivery, no launch, every file of OOMRL_HOME as it was.

The doors' own batteries (hostile JSON, sizes, dates, unknown accounts) live beside each door:
tests/cli/test_repair_door.py, tests/webhook/test_door.py, tests/flows/test_repair_flow.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from oomrl.errors import InvalidAutopsyError
from oomrl.portfolio.ledger import Ledger
from oomrl.settings import get_settings
from tests.cli.helpers import invoke, refused, snapshot
from tests.repair_inputs_for_tests import autopsy_json
from tests.webhook.conftest import SECRET, RecordingLauncher, signed

PROBLEM = "metrics.daily_pnl: Input should be a finite number"
MALFORMED = autopsy_json(metrics={**autopsy_json()["metrics"], "daily_pnl": "NaN"})
AM_TOKEN = "am-token-abcdefghijkl"


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An OOMRL_HOME whose ledger holds the autopsy's account: only the malformation is wrong."""
    home = tmp_path / "home"
    monkeypatch.setenv("OOMRL_HOME", str(home))
    monkeypatch.delenv("OOMRL_LEDGER_URL", raising=False)
    settings = get_settings()
    settings.store.ensure_dirs()
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    ledger.open_account(MALFORMED["account"], 1_000_000)
    ledger.engine.dispose()
    return home


def python_admit(home: Path) -> str:
    from oomrl.repair.loop import admit

    with pytest.raises(InvalidAutopsyError) as refusal:
        admit(MALFORMED, get_settings())
    return str(refusal.value)


def python_file(home: Path) -> str:
    from oomrl.repair.inputs import read_autopsy_file

    path = home.parent / "autopsy.json"
    path.write_text(json.dumps(MALFORMED))
    with pytest.raises(InvalidAutopsyError) as refusal:
        read_autopsy_file(path)
    return str(refusal.value)


def python_context(home: Path) -> str:
    """JSON handed past the door to the repair itself: refused, not half-used."""
    from oomrl.repair.loop import Decision, open_context, run_repair

    with pytest.raises(InvalidAutopsyError) as opening:
        open_context(get_settings(), MALFORMED)  # type: ignore[arg-type]
    with pytest.raises(InvalidAutopsyError) as running:
        run_repair(MALFORMED, None, lambda mandate: Decision(action="approve"))  # type: ignore[arg-type]
    assert str(opening.value) == str(running.value)
    return str(opening.value)


def cli(home: Path) -> str:
    path = home.parent / "autopsy.json"
    path.write_text(json.dumps(MALFORMED))
    # One line, exit code 1
    return refused(
        invoke("repair", "--autopsy", str(path), "--auto-approve", "--provider", "offline"),
        1,
        f"error: invalid autopsy: {PROBLEM}",
    )


def _webhook(home: Path, post: Callable[[TestClient], Any]) -> str:
    from oomrl.settings import WebhookSettings
    from oomrl.webhook.app import create_app
    from oomrl.webhook.deliveries import DeliveryStore

    store_url = f"sqlite:///{home.parent / 'webhook.db'}"
    launcher = RecordingLauncher()
    config = WebhookSettings(secret=SECRET, db_url=store_url, alertmanager_token=AM_TOKEN)
    with TestClient(
        create_app(config, launcher, DeliveryStore(store_url), get_settings())
    ) as client:
        response = post(client)
    assert launcher.calls == [] and DeliveryStore(store_url).get(MALFORMED["alert_id"]) is None
    return response_detail(response)


def response_detail(response: Any) -> str:
    assert response.status_code == 422, response.text
    body = response.json()
    alerts = body.get("alerts")  # an Alertmanager notification answers per alert too
    if alerts is not None:
        assert len(alerts) == 1 and alerts[0]["status"] == 422
        assert PROBLEM in alerts[0]["refused"]
    return str(body["detail"])


def webhook_loss_alert(home: Path) -> str:
    body = json.dumps(MALFORMED).encode()
    return _webhook(
        home, lambda client: client.post("/hooks/loss-alert", content=body, headers=signed(body))
    )


def webhook_alertmanager(home: Path) -> str:
    alert = {
        "status": "firing",
        "fingerprint": "f1",
        "startsAt": "2026-02-27T07:00:00Z",
        "labels": {"alertname": "Loss", "account": "paper"},
        "annotations": {"autopsy": json.dumps(MALFORMED)},
    }
    notification = {
        "version": "4",
        "status": "firing",
        "receiver": "oomrl",
        "groupKey": "{}",
        "alerts": [alert],
    }
    return _webhook(
        home,
        lambda client: client.post(
            "/hooks/alertmanager",
            json=notification,
            headers={"Authorization": f"Bearer {AM_TOKEN}"},
        ),
    )


def flow_parameter(home: Path) -> str:
    from flows.repair import outcome_of, repair
    from tests.flows.prefect_helpers import artifact_keys

    state = repair(MALFORMED, auto_approve=True, return_state=True)
    outcome = outcome_of(state)
    # No retry
    assert state.is_failed() and state.name == "Refused" and PROBLEM in (state.message or "")
    assert outcome["status"] == "failed" and outcome["step"] == "autopsy"
    assert "repair-outcome" in artifact_keys("repair-")  # the reason, as an artifact
    return str(outcome["reason"])  # no claim: the ledger, where claims live, is checked unchanged


@pytest.mark.parametrize(
    "door",
    [
        python_admit,
        python_file,
        python_context,
        cli,
        webhook_loss_alert,
        webhook_alertmanager,
        pytest.param(flow_parameter, marks=pytest.mark.slow),
    ],
    ids=lambda door: door.__name__,
)
def test_each_door_refuses_a_malformed_autopsy_once_and_writes_nothing(
    home: Path, door: Any, request: pytest.FixtureRequest
) -> None:
    if door is flow_parameter:
        request.getfixturevalue("prefect_harness")  # a Prefect server for the flow's run
    before = snapshot(home)
    message = door(home)
    expected = "admit JSON first" if door is python_context else PROBLEM
    assert expected in message and message.count(expected) == 1, message
    assert list((home / "runs").iterdir()) == []  # no run folder
    assert snapshot(home) == before  # nor anything else: ledger, workspace, claims as they were
