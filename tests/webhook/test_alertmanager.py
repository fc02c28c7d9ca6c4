"""POST /hooks/alertmanager: Alertmanager notifications (bearer token or HMAC) become loss
alerts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from oomrl.errors import InvalidAlertError
from oomrl.webhook.alerts import AlertmanagerAlert, autopsy_from_alertmanager
from tests.webhook.conftest import RecordingLauncher, signed

URL = "/hooks/alertmanager"
TOKEN = {"Authorization": "Bearer am-token-abcdefghijkl"}


def notification(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "4",
        "status": "firing",
        "receiver": "oomrl",
        "groupKey": "{}:{}",
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def firing(
    fingerprint: str = "abc123", status: str = "firing", **annotations: str
) -> dict[str, Any]:
    return {
        "status": status,
        "fingerprint": fingerprint,
        "startsAt": "2026-02-27T07:00:00.000Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus/graph",
        "labels": {
            "alertname": "PrincipalLoss",
            "account": "paper",
            "severity": "critical",
            "module": "strategies.daily_momentum",
        },
        "annotations": {"summary": "drawdown beyond 10 %", **annotations},
    }


def test_firing_alerts_start_repairs_resolved_are_ignored(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    payload = notification(firing("f1"), firing("f2", status="resolved"))
    response = client.post(URL, json=payload, headers=TOKEN)
    assert response.status_code == 202
    body = response.json()
    assert body["ignored_resolved"] == 1
    assert [item["alert_id"] for item in body["alerts"]] == ["am-f1-20260227T070000"]
    # A loss alert the repair completes from the ledger (the account's strategy and NAV history).
    assert launcher.calls[0][1] == {
        "alert_id": "am-f1-20260227T070000",
        "account": "paper",
        "as_of": "2026-02-27",
    }


@pytest.mark.slow
def test_repeated_notification_is_a_duplicate(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    payload = notification(firing("f1"))
    client.post(URL, json=payload, headers=TOKEN)
    again = client.post(URL, json=payload, headers=TOKEN)
    assert again.status_code == 200 and again.json()["alerts"][0]["duplicate"] is True
    assert len(launcher.calls) == 1


def test_hmac_signature_also_authenticates(client: TestClient, launcher: RecordingLauncher) -> None:
    body = json.dumps(notification(firing("f9"))).encode()
    assert client.post(URL, content=body, headers=signed(body)).status_code == 202


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic dXNlcjpwYXNz"}],
)
def test_unauthenticated_is_401(
    client: TestClient, launcher: RecordingLauncher, headers: dict[str, str]
) -> None:
    response = client.post(URL, json=notification(firing()), headers=headers)
    assert response.status_code == 401 and launcher.calls == []


@pytest.mark.parametrize(
    "payload",
    [
        {"version": "4"},
        notification(),
        {"version": "4", "status": "firing", "alerts": [{"status": "firing"}]},
    ],
)
def test_invalid_notification_is_422(
    client: TestClient, launcher: RecordingLauncher, payload: dict[str, Any]
) -> None:
    assert client.post(URL, json=payload, headers=TOKEN).status_code == 422
    assert launcher.calls == []


def test_oversized_is_413(client: TestClient) -> None:
    payload = notification(firing(description="z" * 5000))
    assert client.post(URL, json=payload, headers=TOKEN).status_code == 413


def test_embedded_autopsy_annotation_wins(
    client: TestClient, launcher: RecordingLauncher, autopsy: dict[str, Any]
) -> None:
    embedded = {key: value for key, value in autopsy.items() if key != "alert_id"}
    response = client.post(
        URL, json=notification(firing("f3", autopsy=json.dumps(embedded))), headers=TOKEN
    )
    assert response.status_code == 202
    assert launcher.calls[0][1]["constraints"] == {
        **autopsy["constraints"],
        "max_drawdown": None,
        "max_position_weight": None,
        "min_information_ratio": None,
    }
    assert launcher.calls[0][0] == "am-f3-20260227T070000"


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "JSON object"),
        ("[" * 5000 + "]" * 5000, "recursion limit"),
    ],
)
def test_bad_embedded_autopsy_is_rejected(annotation: str, message: str) -> None:
    alert = AlertmanagerAlert.model_validate(firing(autopsy=annotation))
    with pytest.raises(InvalidAlertError, match=message):
        autopsy_from_alertmanager(alert, "paper")


def test_alert_id_label_and_missing_fingerprint() -> None:
    labelled = firing()
    labelled["labels"]["alert_id"] = "ops-77"
    assert (
        autopsy_from_alertmanager(AlertmanagerAlert.model_validate(labelled), "p")["alert_id"]
        == "ops-77"
    )
    anonymous = firing()
    anonymous.pop("fingerprint")
    anonymous["labels"].pop("account")
    mapped = autopsy_from_alertmanager(AlertmanagerAlert.model_validate(anonymous), "default-acct")
    assert mapped["alert_id"].startswith("am-") and mapped["account"] == "default-acct"


def test_alert_for_an_unknown_account_is_422(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    alert = firing()
    alert["labels"]["account"] = "ghost"
    response = client.post(URL, json=notification(alert), headers=TOKEN)
    assert response.status_code == 422 and "unknown account 'ghost'" in response.json()["detail"]
    assert launcher.calls == []


def test_launch_failure_is_503(client: TestClient, launcher: RecordingLauncher) -> None:
    launcher.fail_with = "down"
    assert client.post(URL, json=notification(firing()), headers=TOKEN).status_code == 503
