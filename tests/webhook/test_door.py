"""The webhook's door under hostile input: never a 5xx for a bad body, the repair's own validation,
unknown accounts and strategies refused, every refusal logged, nothing claimed or launched."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from oomrl.repair.inputs import MAX_AUTOPSY_BYTES
from oomrl.settings import OomrlSettings, WebhookSettings, get_settings
from oomrl.webhook.app import create_app
from oomrl.webhook.deliveries import DeliveryStore
from tests.webhook.conftest import SECRET, RecordingLauncher, signed

URL = "/hooks/loss-alert"


@pytest.fixture()
def roomy(
    store_url: str, launcher: RecordingLauncher, settings: OomrlSettings
) -> Iterator[TestClient]:
    """A client with the production body limit, so hostile bodies reach the JSON parser."""
    config = WebhookSettings(secret=SECRET, db_url=store_url)
    with TestClient(create_app(config, launcher, DeliveryStore(store_url), settings)) as client:
        yield client


def deliver(client: TestClient, body: bytes) -> Any:
    return client.post(URL, content=body, headers=signed(body))


def nothing_claimed(store_url: str, *alert_ids: str) -> bool:
    store = DeliveryStore(store_url)
    return all(store.get(alert_id) is None for alert_id in alert_ids)


def with_metric(autopsy: dict[str, Any], raw_value: str) -> bytes:
    """The autopsy with metrics.daily_pnl replaced by a raw JSON token (NaN, 1e999, huge
    integers)."""
    text = json.dumps({**autopsy, "metrics": {**autopsy["metrics"], "daily_pnl": "@@"}})
    return text.replace('"@@"', raw_value).encode()


HUGE = "9" * 100_000


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        (
            "huge integer field",
            lambda a: with_metric(a, HUGE),
            "not valid JSON: number out of range",
        ),
        (
            "huge integer id",
            lambda a: f'{{"alert_id": {HUGE}, "account": "paper"}}'.encode(),
            "number out of range",
        ),
        (
            "deep nesting",
            lambda a: b'{"alert_id": "d-1", "account": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "recursion limit exceeded",
        ),
        ("NaN", lambda a: with_metric(a, "NaN"), "not valid JSON"),
        ("Infinity", lambda a: with_metric(a, "Infinity"), "not valid JSON"),
        ("-Infinity", lambda a: with_metric(a, "-Infinity"), "not valid JSON"),
        (
            "overflowing float",
            lambda a: with_metric(a, "1e999"),
            "metrics.daily_pnl: Input should be a finite number",
        ),
        (
            "NaN as a string",
            lambda a: with_metric(a, '"nan"'),
            "metrics.daily_pnl: Input should be a finite number",
        ),
        ("4000-digit integer", lambda a: with_metric(a, "9" * 4000), "metrics.daily_pnl"),
        (
            "long mandate",
            lambda a: json.dumps({**a, "mandate": "m" * 5000}).encode(),
            "mandate: String should have at most 4000",
        ),
        (
            "many findings",
            lambda a: json.dumps(
                {**a, "diagnostics": {**a["diagnostics"], "findings": ["f"] * 60}}
            ).encode(),
            "diagnostics.findings: List should have at most 50",
        ),
        ("bad date", lambda a: json.dumps({**a, "as_of": "2024-02-30"}).encode(), "as_of"),
        (
            "date before the market",
            lambda a: json.dumps({**a, "as_of": "0001-01-01"}).encode(),
            "as_of 0001-01-01 is before the first XSHG session (1990-12-19)",
        ),
        (
            "date in the future",
            lambda a: json.dumps(
                {"alert_id": "d-1", "account": "paper", "as_of": "2099-01-01"}
            ).encode(),
            "as_of 2099-01-01 is after today",
        ),
        (
            "account over the ledger's width",
            lambda a: json.dumps({**a, "account": "a" * 65}).encode(),
            "account: String should have at most 64",
        ),
        (
            "alert id over the ledger's width",
            lambda a: json.dumps({**a, "alert_id": "a" * 129}).encode(),
            "alert_id: String should have at most 128",
        ),
        (
            "unknown field",
            lambda a: json.dumps({**a, "extra": 1}).encode(),
            "extra: Extra inputs are not permitted",
        ),
    ],
)
def test_hostile_or_invalid_bodies_are_422(
    roomy: TestClient,
    launcher: RecordingLauncher,
    store_url: str,
    autopsy: dict[str, Any],
    name: str,
    make: Any,
    message: str,
) -> None:
    body = make(autopsy)
    assert len(body) <= MAX_AUTOPSY_BYTES, name
    response = deliver(roomy, body)
    assert response.status_code == 422, (name, response.text[:300])
    assert message in response.json()["detail"], name
    assert len(response.content) < 2_000  # the refusal never echoes the body
    assert launcher.calls == [] and nothing_claimed(store_url, autopsy["alert_id"], "d-1")


def test_unknown_account_is_refused(
    client: TestClient, launcher: RecordingLauncher, store_url: str, autopsy: dict[str, Any]
) -> None:
    full = deliver(client, json.dumps({**autopsy, "account": "ghost"}).encode())
    alert = deliver(client, json.dumps({"alert_id": "ghost-1", "account": "ghost"}).encode())
    for response in (full, alert):
        assert response.status_code == 422
        assert "unknown account 'ghost'" in response.json()["detail"]
    assert launcher.calls == [] and nothing_claimed(store_url, autopsy["alert_id"], "ghost-1")


def test_unknown_strategy_is_refused(
    client: TestClient, launcher: RecordingLauncher, autopsy: dict[str, Any]
) -> None:
    for module in ("strategies.no_such_thing", "strategies.registry"):
        body = json.dumps(
            {**autopsy, "diagnostics": {**autopsy["diagnostics"], "module": module}}
        ).encode()
        response = deliver(client, body)
        assert (
            response.status_code == 422
            and f"unknown strategy '{module}'" in response.json()["detail"]
        )
    assert launcher.calls == []


def test_a_ledger_that_cannot_be_reached_is_503(
    config: WebhookSettings,
    launcher: RecordingLauncher,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OOMRL_LEDGER_URL", f"postgresql://nobody@127.0.0.1:{port}/oomrl")
    app = create_app(config, launcher, DeliveryStore(store_url), get_settings())
    with TestClient(app) as client:
        response = deliver(client, b'{"alert_id": "db-down-1", "account": "paper"}')
    assert (
        response.status_code == 503
        and "cannot check the alert against the ledger" in response.json()["detail"]
    )
    assert launcher.calls == [] and nothing_claimed(store_url, "db-down-1")


def test_refusals_leave_a_log_line(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="oomrl.webhook")
    unsigned = client.post(URL, content=b'{"alert_id": "l-1", "account": "paper"}')
    big = json.dumps({"alert_id": "l-2", "pad": "x" * 5000}).encode()
    oversized = client.post(URL, content=big, headers=signed(big))
    invalid = deliver(client, b'{"alert_id": "l-3"}')
    assert [r.status_code for r in (unsigned, oversized, invalid)] == [401, 413, 422]
    lines = [r.getMessage() for r in caplog.records if r.name == "oomrl.webhook.app"]
    assert any("refused with 401: missing X-OOMRL-Timestamp" in line for line in lines)
    assert any("refused with 413: body of" in line for line in lines)
    assert any(
        "refused with 422: invalid loss alert" in line and "account: Field required" in line
        for line in lines
    )
    assert all(line.startswith("POST /hooks/loss-alert from ") for line in lines)


def test_a_delivery_database_failing_under_the_webhook_is_503(
    client: TestClient, launcher: RecordingLauncher, store_url: str
) -> None:
    import sqlalchemy as sa

    with sa.create_engine(store_url).begin() as conn:  # the table is gone under the running webhook
        conn.execute(sa.text("DROP TABLE webhook_deliveries"))
    response = deliver(client, b'{"alert_id": "db-gone-1", "account": "paper"}')
    assert response.status_code == 503, response.text
    assert response.json()["detail"].startswith(
        "cannot record the delivery: cannot use the database"
    )
    assert "retry the delivery" in response.json()["detail"] and launcher.calls == []


SPAN = "marked 2026-02-26..2026-02-27"  # the conftest's marks of paper


@pytest.mark.parametrize(
    ("as_of", "reason"),
    [
        (
            "2024-07-12",
            "alert dated 2024-07-12 is before account 'paper''s first session "
            f"(2026-02-26; {SPAN})",
        ),
        (
            "2026-03-02",
            "alert dated 2026-03-02 is after account 'paper''s last marked session "
            f"(2026-02-27; {SPAN})",
        ),
    ],
)
def test_an_alert_dated_outside_the_accounts_marked_sessions_is_refused(
    client: TestClient,
    launcher: RecordingLauncher,
    store_url: str,
    autopsy: dict[str, Any],
    as_of: str,
    reason: str,
) -> None:
    full = deliver(client, json.dumps({**autopsy, "as_of": as_of}).encode())
    alert = deliver(
        client, json.dumps({"alert_id": "out-1", "account": "paper", "as_of": as_of}).encode()
    )
    for response in (full, alert):
        assert response.status_code == 422, response.text
        assert reason in response.json()["detail"]
    assert launcher.calls == [] and nothing_claimed(store_url, autopsy["alert_id"], "out-1")


def test_an_alert_without_the_metrics_its_rule_reads_is_refused(
    client: TestClient,
    launcher: RecordingLauncher,
    store_url: str,
    settings: OomrlSettings,
    autopsy: dict[str, Any],
) -> None:
    from oomrl.portfolio.ledger import Ledger

    ledger = Ledger(settings.ledger_url)
    ledger.open_account("fresh", 1_000_000)  # opened, never marked: nothing to compute metrics from
    ledger.engine.dispose()
    no_ir = {
        **autopsy,
        "trigger": {**autopsy["trigger"], "rule": "ir_decay"},
        "metrics": {**autopsy["metrics"], "rolling_ir_60d": None},
    }
    cases = [
        (
            no_ir,
            f"alert dated 2026-02-27 (window from 2026-01-23) has no metrics.rolling_ir_60d, which "
            f"rule 'ir_decay' reads (account 'paper' {SPAN.replace('marked', 'marked:')})",
        ),
        (
            {"alert_id": "bare-1", "account": "fresh", "as_of": "2026-02-27"},
            "alert dated 2026-02-27 carries no metrics and account 'fresh' has no marked "
            "session to compute "
            "them from (marked: none)",
        ),
    ]
    for body, reason in cases:
        response = deliver(client, json.dumps(body).encode())
        assert response.status_code == 422, response.text
        assert reason in response.json()["detail"]
    assert launcher.calls == [] and nothing_claimed(store_url, autopsy["alert_id"], "bare-1")
    # The same full autopsy for an account never marked carries its own metrics: accepted.
    accepted = deliver(client, json.dumps({**autopsy, "account": "fresh"}).encode())
    assert accepted.status_code == 202, accepted.text
