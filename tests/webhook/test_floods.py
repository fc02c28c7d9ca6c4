"""Doors that hold under a flood: alerts per notification, runs per minute per account, repairs
running in all, each bad alert refused alone; strict digits in the headers; a run Prefect no longer
knows is gone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from oomrl.repair.claims import ClaimBook
from oomrl.settings import OomrlSettings, WebhookSettings
from oomrl.webhook.app import create_app
from oomrl.webhook.deliveries import DeliveryStore
from tests.webhook.conftest import RecordingLauncher, signed
from tests.webhook.test_alertmanager import TOKEN, firing, notification

LOSS = "/hooks/loss-alert"
AM = "/hooks/alertmanager"


def loss(client: TestClient, alert_id: str, account: str = "paper") -> Any:
    body = json.dumps({"alert_id": alert_id, "account": account}).encode()
    return client.post(LOSS, content=body, headers=signed(body))


def am_alert(n: int, **labels: str) -> dict[str, Any]:
    alert = firing(f"fp{n}")
    alert["labels"] = {**alert["labels"], **labels}
    return alert


def rows(store_url: str) -> int:
    with DeliveryStore(store_url)._engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM webhook_deliveries").scalar_one())


# Header bytes reach the app as Latin-1 text, where "²", "³" and "¹" are digits to str.isdigit().
@pytest.mark.parametrize("stamp", ["²", "17000000¹", "³³³"])
def test_a_timestamp_of_unicode_digits_is_401_not_a_500(
    client: TestClient, launcher: RecordingLauncher, stamp: str
) -> None:
    body = b'{"alert_id": "u-1", "account": "paper"}'
    headers: dict[str, Any] = {**signed(body), "X-OOMRL-Timestamp": stamp.encode("latin-1")}
    response = client.post(LOSS, content=body, headers=headers)
    assert response.status_code == 401 and "must be unix seconds" in response.json()["detail"]
    assert launcher.calls == []


def test_a_content_length_of_unicode_digits_is_400(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    body = b'{"alert_id": "u-2", "account": "paper"}'
    headers: dict[str, Any] = {**signed(body), "Content-Length": "²".encode("latin-1")}
    response = client.post(LOSS, content=body, headers=headers)
    assert response.status_code == 400 and response.json() == {
        "detail": "Content-Length is not a number"
    }
    assert launcher.calls == []


def test_a_run_prefect_no_longer_knows_is_gone_and_the_alert_starts_again(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    assert loss(client, "gone-1").status_code == 202
    launcher.states["run-1"] = None  # deleted in the UI (Prefect answers 404)
    again = loss(client, "gone-1")
    assert again.status_code == 202 and again.json()["replaces"] == "run-1"
    assert launcher.attempts == [None, "run-1"]  # a new idempotency key: a new run
    assert loss(client, "gone-1").status_code == 200  # and that one is live


def test_runs_per_minute_per_account_are_capped(
    client: TestClient, launcher: RecordingLauncher, store_url: str
) -> None:
    assert [loss(client, f"rate-{n}").status_code for n in range(3)] == [202, 202, 202]
    refused = loss(client, "rate-3")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "60"
    assert refused.json()["detail"] == (
        "account paper started 3 repair run(s) in the last 60 s, the most "
        "OOMRL_WEBHOOK_MAX_RUNS_PER_MINUTE=3 allows; retry later"
    )
    assert len(launcher.calls) == 3 and rows(store_url) == 3  # the refused alert left no claim
    assert loss(client, "rate-0").status_code == 200  # a duplicate is no new run: never refused


def test_repairs_running_in_all_are_capped_on_every_path(
    config: WebhookSettings, launcher: RecordingLauncher, store_url: str, settings: OomrlSettings
) -> None:
    book = ClaimBook(settings.ledger_url).create()
    for n in range(2):
        book.register(f"live-{n}", "other")  # two live repairs (a CLI, a flow), beating
    capped = settings.model_copy(
        update={"agent": settings.agent.model_copy(update={"repair_max_running": 2})}
    )
    with TestClient(
        create_app(config, launcher=launcher, store=DeliveryStore(store_url), settings=capped)
    ) as client:
        refused = loss(client, "cap-1")
        assert (
            refused.status_code == 503
            and "2 repairs are running, the most OOMRL_REPAIR_MAX_RUNNING=2"
            in refused.json()["detail"]
        )
        assert launcher.calls == [] and rows(store_url) == 0
        book.release("live-0")
        assert loss(client, "cap-1").status_code == 202


def test_one_notification_with_too_many_alerts_is_413(
    config: WebhookSettings, launcher: RecordingLauncher, store_url: str, settings: OomrlSettings
) -> None:
    # The default: the count is the limit
    roomy = config.model_copy(update={"max_body_bytes": 256 * 1024})
    with TestClient(
        create_app(roomy, launcher=launcher, store=DeliveryStore(store_url), settings=settings)
    ) as client:
        response = client.post(
            AM, json=notification(*(am_alert(n) for n in range(21))), headers=TOKEN
        )
    assert response.status_code == 413
    assert response.json()["detail"] == (
        "the notification carries 21 firing alerts, more than "
        "OOMRL_WEBHOOK_MAX_ALERTS=20; set `max_alerts: 20` in "
        "Alertmanager's webhook_config"
    )
    assert launcher.calls == [] and rows(store_url) == 0


def test_each_bad_alert_is_refused_alone_with_its_reason(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    payload = notification(
        am_alert(1, alert_id="good-1"),
        am_alert(2, alert_id="bad-1\n"),
        am_alert(3, account="ghost"),
        am_alert(4, alert_id="good-2"),
    )
    response = client.post(AM, json=payload, headers=TOKEN)
    assert response.status_code == 202
    results = response.json()["alerts"]
    assert [(r["alert_id"], r["status"]) for r in results] == [
        ("good-1", 202),
        ("bad-1\n", 422),
        ("am-fp3-20260227T070000", 422),
        ("good-2", 202),
    ]
    assert "label alert_id 'bad-1\\n' is no alert id" in results[1]["refused"]
    assert "unknown account 'ghost'" in results[2]["refused"]
    assert [call[0] for call in launcher.calls] == ["good-1", "good-2"]


def test_a_flood_of_alerts_for_one_account_starts_only_its_share(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    response = client.post(AM, json=notification(*(am_alert(n) for n in range(5))), headers=TOKEN)
    assert response.status_code == 202
    assert [r["status"] for r in response.json()["alerts"]] == [202, 202, 202, 429, 429]
    assert len(launcher.calls) == 3
    only_refused = client.post(AM, json=notification(am_alert(9)), headers=TOKEN)
    assert only_refused.status_code == 429  # Alertmanager sends it again later
    every_one_bad = client.post(AM, json=notification(am_alert(8, account="ghost")), headers=TOKEN)
    assert every_one_bad.status_code == 422
