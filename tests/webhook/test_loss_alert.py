"""POST /hooks/loss-alert: every status code of the webhook contract, and no run for any rejected
request."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from oomrl.diagnostics.autopsy import input_json
from oomrl.repair.inputs import load_autopsy
from oomrl.settings import (
    OomrlSettings,
    SettingsError,
    WebhookConfigError,
    WebhookSettings,
    webhook_settings,
)
from oomrl.webhook.app import create_app
from oomrl.webhook.deliveries import DeliveryStore
from tests.webhook.conftest import SECRET, RecordingLauncher, signed

URL = "/hooks/loss-alert"


def post(client: TestClient, payload: Any, **kwargs: Any) -> Any:
    body = json.dumps(payload).encode()
    return client.post(URL, content=body, headers=signed(body, **kwargs))


def test_signed_alert_starts_one_repair(
    client: TestClient, launcher: RecordingLauncher, autopsy: dict[str, Any]
) -> None:
    response = post(client, autopsy)
    assert response.status_code == 202
    assert response.json() == {
        "alert_id": "e2e-alert-0001",
        "duplicate": False,
        "flow_run_id": "run-1",
        "event_id": None,
        "mode": "deployment",
    }
    assert launcher.calls == [("e2e-alert-0001", input_json(load_autopsy(autopsy)))]


def test_loss_alert_with_account_is_accepted(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    assert post(client, {"alert_id": "min-1", "account": "paper"}).status_code == 202
    assert (
        post(client, {"alert_id": "min-2", "account": "paper", "as_of": "2026-02-27"}).status_code
        == 202
    )
    assert launcher.calls == [
        ("min-1", {"alert_id": "min-1", "account": "paper"}),
        ("min-2", {"alert_id": "min-2", "account": "paper", "as_of": "2026-02-27"}),
    ]


def test_replayed_alert_returns_existing_run(
    client: TestClient, launcher: RecordingLauncher, autopsy: dict[str, Any]
) -> None:
    first = post(client, autopsy).json()
    again = post(client, autopsy)
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["flow_run_id"] == first["flow_run_id"]
    assert len(launcher.calls) == 1


def test_seen_ids_survive_a_restart(
    config: WebhookSettings, store_url: str, settings: OomrlSettings, autopsy: dict[str, Any]
) -> None:
    first_launcher, second_launcher = RecordingLauncher(), RecordingLauncher()
    with TestClient(
        create_app(config, first_launcher, DeliveryStore(store_url), settings)
    ) as first:
        assert post(first, autopsy).status_code == 202
    with TestClient(
        create_app(config, second_launcher, DeliveryStore(store_url), settings)
    ) as second:
        response = post(second, autopsy)
    assert response.status_code == 200 and response.json()["flow_run_id"] == "run-1"
    assert second_launcher.calls == []


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing X-OOMRL-Timestamp"),
        ({"X-OOMRL-Timestamp": "{now}"}, "missing X-OOMRL-Signature"),
        (
            {"X-OOMRL-Timestamp": "{now}", "X-OOMRL-Signature": "sha256=" + "a" * 64},
            "does not match",
        ),
    ],
)
def test_missing_or_forged_signature_is_401(
    client: TestClient, launcher: RecordingLauncher, headers: dict[str, str], message: str
) -> None:
    now = str(int(time.time()))
    filled = {key: value.replace("{now}", now) for key, value in headers.items()}
    response = client.post(URL, content=b'{"alert_id": "x1"}', headers=filled)
    assert response.status_code == 401
    assert message in response.json()["detail"]
    assert launcher.calls == []


def test_wrong_secret_is_401(client: TestClient, launcher: RecordingLauncher) -> None:
    response = post(client, {"alert_id": "x2"}, secret="another-secret-entirely")
    assert response.status_code == 401 and launcher.calls == []


def test_stale_signature_is_401(client: TestClient, launcher: RecordingLauncher) -> None:
    response = post(client, {"alert_id": "x3"}, timestamp=int(time.time()) - 301)
    assert response.status_code == 401 and "stale" in response.json()["detail"]
    assert launcher.calls == []


def test_body_tampered_after_signing_is_401(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    headers = signed(b'{"alert_id": "x4"}')
    response = client.post(URL, content=b'{"alert_id": "x5"}', headers=headers)
    assert response.status_code == 401 and launcher.calls == []


def test_oversized_by_content_length_is_413(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    body = json.dumps({"alert_id": "big", "pad": "x" * 5000}).encode()
    response = client.post(URL, content=body, headers=signed(body))
    assert response.status_code == 413 and "4096" in response.json()["detail"]
    assert launcher.calls == []


def test_oversized_streamed_body_is_413(client: TestClient, launcher: RecordingLauncher) -> None:
    """A chunked body has no Content-Length: the bytes themselves are counted."""
    chunks = [b'{"alert_id": "big", "pad": "', b"x" * 3000, b"x" * 3000, b'"}']
    body = b"".join(chunks)
    headers = signed(body)
    response = client.post(URL, content=iter(chunks), headers=headers)
    assert response.status_code == 413 and launcher.calls == []


def test_bad_content_length_is_400(
    config: WebhookSettings, launcher: RecordingLauncher, settings: OomrlSettings
) -> None:
    import asyncio

    app = create_app(config, launcher=launcher, settings=settings)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": URL,
        "raw_path": URL.encode(),
        "query_string": b"",
        "headers": [(b"content-length", b"12abc")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 400 and launcher.calls == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"account": "paper"}', "alert_id"),
        (b'{"alert_id": "", "account": "paper"}', "alert_id"),
        (b'{"alert_id": "../../etc", "account": "paper"}', "alert_id"),
        (b'{"alert_id": "ok-1", "account": ""}', "account"),
        (b'{"alert_id": "ok-1"}', "account: Field required"),
        (b'{"alert_id": "ok-1", "account": "paper", "as_of": "2024-13-45"}', "as_of"),
        (b'{"alert_id": "ok-1", "account": "paper", "mandate": "x"}', "mandate: Extra inputs"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"alert_id": "ok-12345", "event": "FINANCIAL_DEGRADATION_DETECTED"}', "invalid autopsy"),
    ],
)
def test_malformed_signed_body_is_422(
    client: TestClient, launcher: RecordingLauncher, body: bytes, message: str
) -> None:
    response = client.post(URL, content=body, headers=signed(body))
    assert response.status_code == 422
    assert message in response.json()["detail"]
    assert launcher.calls == []


def test_prefect_unavailable_is_503_and_the_alert_can_be_retried(
    client: TestClient, launcher: RecordingLauncher
) -> None:
    launcher.fail_with = "server down"
    assert post(client, {"alert_id": "retry-1", "account": "paper"}).status_code == 503
    launcher.fail_with = None
    response = post(client, {"alert_id": "retry-1", "account": "paper"})
    assert response.status_code == 202 and len(launcher.calls) == 1


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "mode": "deployment"}


@pytest.mark.parametrize(
    ("secret", "token", "message"),
    [
        (None, None, "OOMRL_WEBHOOK_SECRET is not set"),
        ("short", None, "OOMRL_WEBHOOK_SECRET is 5 characters; use at least 16"),
        (" " * 20 + "x", None, "OOMRL_WEBHOOK_SECRET is 1 characters"),
        (SECRET, "tok", "OOMRL_WEBHOOK_ALERTMANAGER_TOKEN is 3 characters; use at least 16"),
        (SECRET, "", "OOMRL_WEBHOOK_ALERTMANAGER_TOKEN is 0 characters"),
    ],
)
def test_refuses_to_start_without_real_secrets(
    store_url: str, settings: OomrlSettings, secret: str | None, token: str | None, message: str
) -> None:
    with pytest.raises(WebhookConfigError, match=message):
        create_app(
            WebhookSettings(secret=secret, alertmanager_token=token, db_url=store_url),
            launcher=RecordingLauncher(),
            settings=settings,
        )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("garbage", "OOMRL_WEBHOOK_DB_URL='garbage': not a database URL SQLAlchemy understands"),
        ("postgresql+asyncpg://x@127.0.0.1/x", "asyncpg is an async driver"),
    ],
)
def test_a_bad_delivery_database_url_is_named(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("OOMRL_WEBHOOK_DB_URL", value)
    with pytest.raises(SettingsError, match=re.escape(message)):
        webhook_settings()


def test_secret_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, store_url: str, settings: OomrlSettings
) -> None:
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("OOMRL_WEBHOOK_DB_URL", store_url)
    monkeypatch.setenv("OOMRL_WEBHOOK_MAX_BODY_BYTES", "100")
    app = create_app(None, launcher=RecordingLauncher(), settings=settings)
    with TestClient(app) as client:
        body = json.dumps({"alert_id": "env-1", "pad": "y" * 200}).encode()
        assert client.post(URL, content=body, headers=signed(body)).status_code == 413
