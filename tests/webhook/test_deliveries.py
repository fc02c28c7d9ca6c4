"""Concurrent deliveries of one alert: one launch, and a launch failure is a 503 for every one of
them; a claim orphaned by a dead process is taken over; a run that crashed, failed, was cancelled or
went silent (no repair-claim heartbeat: its worker was killed) is started again by the next
delivery."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from oomrl.diagnostics.autopsy import RepairInput
from oomrl.errors import LaunchError
from oomrl.repair.claims import CLAIM_SILENT_S, ClaimBook
from oomrl.settings import OomrlSettings, WebhookSettings
from oomrl.webhook import app as webhook_app
from oomrl.webhook.app import create_app
from oomrl.webhook.deliveries import DELIVERIES, Delivery, DeliveryStore
from oomrl.webhook.launch import Launch, RunStatus
from tests.webhook.conftest import RecordingLauncher, signed

URL = "/hooks/loss-alert"
ALERT = {"alert_id": "conc-1", "account": "paper"}
CLAIM_DEADLINE_S = 60


class SlowLauncher(RecordingLauncher):
    """Starts a run only once every concurrent delivery has claimed the alert (as a busy Prefect
    server would be slow to answer), then succeeds or fails: the others are sure to be waiting on
    its claim."""

    def __init__(self, fail: bool, store: CountingStore, deliveries: int) -> None:
        super().__init__()
        self.fail, self.store, self.deliveries = fail, store, deliveries
        self.started = 0

    async def launch(
        self, autopsy: RepairInput, alert_id: str, attempt: str | None = None
    ) -> Launch:
        self.started += 1
        deadline = time.monotonic() + CLAIM_DEADLINE_S
        while self.store.claims < self.deliveries and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert self.store.claims == self.deliveries, (
            "the other deliveries never tried to claim the alert"
        )
        if self.fail:
            raise LaunchError("Prefect answered 500")
        return await super().launch(autopsy, alert_id, attempt)


class CountingStore(DeliveryStore):
    """The real delivery store, counting claims (how the launcher knows every delivery has
    arrived)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.claims = 0
        self._lock = threading.Lock()  # claims run on the server's worker threads

    def claim(self, alert_id: str, account: str | None, source: str) -> Delivery | None:
        try:
            return super().claim(alert_id, account, source)
        finally:
            with self._lock:
                self.claims += 1


async def deliver_together(app: Any, body: bytes, copies: int) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
        return await asyncio.gather(
            *[client.post(URL, content=body, headers=signed(body)) for _ in range(copies)]
        )


def deliver(app: Any, payload: dict[str, Any], copies: int = 1) -> list[httpx.Response]:
    return asyncio.run(deliver_together(app, json.dumps(payload).encode(), copies))


@pytest.fixture()
def make_app(config: WebhookSettings, store_url: str, settings: OomrlSettings) -> Any:
    def make(launcher: Any, store: DeliveryStore | None = None) -> Any:
        return create_app(config, launcher, store or DeliveryStore(store_url), settings)

    return make


@pytest.mark.slow
def test_a_failed_launch_is_503_for_every_concurrent_delivery(
    make_app: Any, store_url: str
) -> None:
    store = CountingStore(store_url)
    failing = SlowLauncher(fail=True, store=store, deliveries=5)
    responses = deliver(make_app(failing, store), ALERT, copies=5)
    assert [r.status_code for r in responses] == [503] * 5
    assert failing.started == 1  # one delivery launched, the others waited for its outcome
    assert sum("Prefect answered 500" in r.json()["detail"] for r in responses) == 1
    assert sum("failed; retry the delivery" in r.json()["detail"] for r in responses) == 4
    assert DeliveryStore(store_url).get("conc-1") is None
    working = RecordingLauncher()
    retried = deliver(make_app(working), ALERT)[0]  # the next delivery after a failure starts it
    assert retried.status_code == 202 and retried.json()["flow_run_id"] == "run-1"


def test_concurrent_deliveries_share_one_run(make_app: Any, store_url: str) -> None:
    store = CountingStore(store_url)
    slow = SlowLauncher(fail=False, store=store, deliveries=5)
    responses = deliver(make_app(slow, store), ALERT, copies=5)
    assert sorted(r.status_code for r in responses) == [200, 200, 200, 200, 202]
    assert {r.json()["flow_run_id"] for r in responses} == {"run-1"}
    assert slow.started == 1


def test_a_claim_orphaned_mid_launch_is_taken_over(make_app: Any, store_url: str) -> None:
    store = DeliveryStore(store_url)
    assert store.claim("conc-1", "paper", "loss-alert") is None  # a process that then died
    launcher = RecordingLauncher()
    with sa.create_engine(store_url).begin() as conn:
        conn.execute(
            DELIVERIES.update().values(
                received_at=datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
            )
        )
    response = deliver(make_app(launcher), ALERT)[0]
    assert response.status_code == 202 and len(launcher.calls) == 1


@pytest.mark.slow  # waits out the 3 s a pending claim lives
def test_a_recent_pending_claim_is_waited_for_then_503(
    make_app: Any, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LAUNCH_WAIT is also the age at which a pending claim counts as abandoned: the claim is made
    # after the app is built and must stay younger than that until the delivery looks at it, on a
    # busy machine too.
    monkeypatch.setattr(webhook_app, "LAUNCH_WAIT", timedelta(seconds=3))
    launcher = RecordingLauncher()
    app = make_app(launcher)
    assert DeliveryStore(store_url).claim("conc-1", "paper", "loss-alert") is None
    response = deliver(app, ALERT)[0]
    assert response.status_code == 503 and "still being started" in response.json()["detail"]
    assert launcher.calls == []


@pytest.mark.parametrize("state", ["CRASHED", "FAILED", "CANCELLED"])
def test_redelivery_after_a_run_ended_badly_starts_a_new_run(make_app: Any, state: str) -> None:
    launcher = RecordingLauncher()
    app = make_app(launcher)
    assert deliver(app, ALERT)[0].status_code == 202
    launcher.states["run-1"] = state
    again = deliver(app, ALERT, copies=3)
    assert sorted(r.status_code for r in again) == [200, 200, 202]
    started = next(r.json() for r in again if r.status_code == 202)
    assert started["flow_run_id"] == "run-2" and started["replaces"] == "run-1"
    assert launcher.attempts == [None, "run-1"]
    assert {r.json()["flow_run_id"] for r in again} == {"run-2"}


@pytest.mark.parametrize("state", ["COMPLETED", "RUNNING", "PAUSED"])
def test_redelivery_of_a_live_or_finished_run_is_a_duplicate(
    make_app: Any, state: str | None
) -> None:
    launcher = RecordingLauncher()
    app = make_app(launcher)
    deliver(app, ALERT)
    # (a run Prefect does not know is gone: tests/webhook/test_floods.py)
    launcher.states["run-1"] = state
    again = deliver(app, ALERT)[0]
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert len(launcher.calls) == 1


def test_prefect_down_while_checking_a_redelivery_is_503(make_app: Any) -> None:
    class Flaky(RecordingLauncher):
        async def run_state(self, flow_run_id: str) -> RunStatus | None:
            raise LaunchError("could not read flow run: ConnectError")

    launcher = Flaky()
    app = make_app(launcher)
    assert deliver(app, ALERT)[0].status_code == 202
    again = deliver(app, ALERT)[0]
    assert again.status_code == 503 and "could not read flow run" in again.json()["detail"]


def test_the_delivery_database_is_created_private(tmp_path: Path) -> None:
    """Often the ledger itself: created 0600 in a 0700 folder before SQLite writes a byte, whatever
    the umask."""
    database = tmp_path / "fresh" / "ledger.db"
    old = os.umask(0o022)
    try:
        DeliveryStore(f"sqlite:///{database}").claim("private-1", "paper", "loss-alert")
    finally:
        os.umask(old)
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert stat.S_IMODE(database.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("state", ["RUNNING", "PAUSED", "PENDING"])
def test_redelivery_after_the_run_went_silent_starts_a_new_run(
    make_app: Any, settings: OomrlSettings, state: str
) -> None:
    launcher = RecordingLauncher()
    app = make_app(launcher)
    assert deliver(app, ALERT)[0].status_code == 202
    launcher.states["run-1"] = state
    book = ClaimBook(settings.ledger_url).create()
    book.register("run-1", "paper")  # beating: alive, whatever Prefect's timestamp says
    launcher.since["run-1"] = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=2)
    assert deliver(app, ALERT)[0].status_code == 200 and launcher.crashed == []
    with book.engine.begin() as conn:  # its process was SIGKILLed: the beats stopped
        stopped = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=CLAIM_SILENT_S + 5)
        conn.execute(book.table.update().values(beat_at=stopped))
    again = deliver(app, ALERT)[0]
    assert again.status_code == 202 and again.json()["replaces"] == "run-1"
    assert launcher.crashed == ["run-1"]  # the runs list says it is gone


def test_a_run_that_never_beat_is_silent_only_once_it_is_old(make_app: Any) -> None:
    launcher = RecordingLauncher()
    app = make_app(launcher)
    assert deliver(app, ALERT)[0].status_code == 202
    launcher.states["run-1"] = "PENDING"  # a worker took it, then died before the flow started
    assert deliver(app, ALERT)[0].status_code == 200
    launcher.since["run-1"] = datetime.now(UTC).replace(tzinfo=None) - timedelta(
        seconds=CLAIM_SILENT_S + 5
    )
    again = deliver(app, ALERT)[0]
    assert again.status_code == 202 and again.json()["replaces"] == "run-1"
