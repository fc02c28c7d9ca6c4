"""The webhook's intake without its HTTP layer: the same door, one run per alert id, relaunch after
a crash."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from oomrl.settings import OomrlSettings, WebhookSettings
from oomrl.webhook.app import WebhookIntake
from oomrl.webhook.deliveries import DeliveryStore
from oomrl.webhook.launch import LaunchError
from tests.webhook.conftest import RecordingLauncher


@pytest.fixture()
def intake(
    config: WebhookSettings, launcher: RecordingLauncher, store_url: str, settings: OomrlSettings
) -> WebhookIntake:
    """An intake as create_app builds it, with no app around it."""
    secret, token = config.required_secret(), config.required_token()
    return WebhookIntake(config, settings, launcher, DeliveryStore(store_url), secret, token)


def test_the_intake_starts_one_run_per_alert_and_again_after_a_crash(
    intake: WebhookIntake, launcher: RecordingLauncher, autopsy: dict[str, Any]
) -> None:
    async def deliveries() -> list[tuple[int, dict[str, Any]]]:
        admitted = await intake.admit(autopsy)
        first = await intake.start_repair(admitted, "loss-alert")
        again = await intake.start_repair(admitted, "loss-alert")
        launcher.states["run-1"] = "CRASHED"
        return [first, again, await intake.start_repair(admitted, "loss-alert")]

    first, again, relaunched = asyncio.run(deliveries())
    assert first[0] == 202 and first[1]["flow_run_id"] == "run-1" and "replaces" not in first[1]
    assert again[0] == 200 and again[1]["duplicate"] is True and again[1]["flow_run_id"] == "run-1"
    assert relaunched[0] == 202 and relaunched[1]["replaces"] == "run-1"
    assert launcher.attempts == [None, "run-1"]


def test_a_failed_launch_releases_the_claim(
    intake: WebhookIntake, launcher: RecordingLauncher, autopsy: dict[str, Any]
) -> None:
    launcher.fail_with = "Prefect is down"

    async def deliver() -> tuple[int, dict[str, Any]]:
        return await intake.start_repair(await intake.admit(autopsy), "loss-alert")

    with pytest.raises(LaunchError, match="Prefect is down"):
        asyncio.run(deliver())
    assert intake.store.get(autopsy["alert_id"]) is None
    launcher.fail_with = None
    assert asyncio.run(deliver())[0] == 202
