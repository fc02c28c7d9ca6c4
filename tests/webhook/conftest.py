"""Fixtures for the webhook tests: a recording launcher, a store on a temporary SQLite file, a
ledger holding the account `paper`, a client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from oomrl.diagnostics.autopsy import RepairInput, input_json
from oomrl.errors import LaunchError
from oomrl.portfolio.ledger import Ledger
from oomrl.settings import OomrlSettings, WebhookSettings, get_settings
from oomrl.webhook.app import create_app
from oomrl.webhook.deliveries import DeliveryStore
from oomrl.webhook.launch import Launch, RunStatus
from oomrl.webhook.signing import sign

SECRET = "test-secret-0123456789abcdef"
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "ops" / "autopsy.json"
# Paper's marked sessions: the fixture alert is dated on the last
MARKED = ("2026-02-26", "2026-02-27")


class RecordingLauncher:
    """Stands in for the Prefect API at this level; the e2e suite uses the real one."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.attempts: list[str | None] = []
        self.fail_with: str | None = None
        self.states: dict[str, str | None] = {}
        self.since: dict[str, datetime] = {}
        self.crashed: list[str] = []

    async def launch(
        self, autopsy: RepairInput, alert_id: str, attempt: str | None = None
    ) -> Launch:
        if self.fail_with:
            raise LaunchError(self.fail_with)
        self.calls.append((alert_id, input_json(autopsy)))  # what the real launchers send
        self.attempts.append(attempt)
        return Launch(flow_run_id=f"run-{len(self.calls)}", event_id=None)

    async def run_state(self, flow_run_id: str) -> RunStatus | None:
        state = self.states.get(flow_run_id, "RUNNING")
        since = self.since.get(flow_run_id, datetime.now(UTC).replace(tzinfo=None))
        return None if state is None else RunStatus(state, since)

    async def mark_crashed(self, flow_run_id: str, message: str) -> None:
        self.crashed.append(flow_run_id)


@pytest.fixture()
def autopsy() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


@pytest.fixture()
def launcher() -> RecordingLauncher:
    return RecordingLauncher()


@pytest.fixture()
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state' / 'webhook.db'}"


@pytest.fixture()
def config(store_url: str) -> WebhookSettings:
    return WebhookSettings(
        secret=SECRET,
        db_url=store_url,
        max_body_bytes=4096,
        alertmanager_token="am-token-abcdefghijkl",
    )


@pytest.fixture()
def settings(oomrl_home: Path) -> OomrlSettings:
    """OOMRL settings whose ledger holds the account `paper`, marked on MARKED (the webhook refuses
    unknown accounts, and alerts dated outside the account's marked sessions)."""
    from tests.agent.repair_helpers import mark_account

    settings = get_settings()
    settings.store.ensure_dirs()
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    ledger.open_account("paper", 1_000_000)
    ledger.engine.dispose()
    mark_account(settings.ledger_url, "paper", list(MARKED))
    return settings


@pytest.fixture()
def client(
    config: WebhookSettings, launcher: RecordingLauncher, store_url: str, settings: OomrlSettings
) -> Iterator[TestClient]:
    app = create_app(config, launcher=launcher, store=DeliveryStore(store_url), settings=settings)
    with TestClient(app) as test_client:
        yield test_client


def signed(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    """Headers for a correctly signed JSON delivery."""
    return {"Content-Type": "application/json", **sign(body, secret, timestamp)}
