"""The launchers (orchestration/launch.py) against a real (test-harness) Prefect API through
Prefect's client: one run per alert id, clear errors."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from oomrl.diagnostics.autopsy import LossAlert
from oomrl.webhook.launch import LaunchError
from orchestration.launch import DeploymentLauncher, EventLauncher, PrefectApi, launcher_for


def alert(alert_id: str, account: str = "paper") -> LossAlert:
    return LossAlert(alert_id=alert_id, account=account)


def _make_deployment(flow_name: str) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client

    @flow(name=flow_name)
    def stand_in(
        autopsy: dict[str, Any], auto_approve: bool = False, approval_timeout_s: int = 3600
    ) -> None:
        """Never run here: only its deployment is needed."""

    async def create() -> None:
        async with get_client() as client:
            flow_id = await client.create_flow(stand_in)
            await client.create_deployment(flow_id=flow_id, name="repair")

    asyncio.run(create())


@pytest.fixture()
def harness_api(prefect_harness: None) -> PrefectApi:
    """The REST endpoint of the session's Prefect test server."""
    from prefect.settings import PREFECT_API_URL

    return PrefectApi(api_url=PREFECT_API_URL.value(), api_key="")


def test_deployment_launcher_is_idempotent_per_alert_id(harness_api: PrefectApi) -> None:
    from prefect.client.orchestration import get_client

    _make_deployment("repair-launch-test")
    launcher = DeploymentLauncher("repair-launch-test/repair", auto_approve=True, api=harness_api)
    first = asyncio.run(launcher.launch(alert("idem-1"), "idem-1"))
    second = asyncio.run(launcher.launch(alert("idem-1"), "idem-1"))
    other = asyncio.run(launcher.launch(alert("idem-2"), "idem-2"))
    assert first.flow_run_id == second.flow_run_id != other.flow_run_id

    async def created() -> Any:
        async with get_client() as client:
            return await client.read_flow_run(uuid.UUID(first.flow_run_id))

    run = asyncio.run(created())
    assert run.parameters == {
        "autopsy": {"alert_id": "idem-1", "account": "paper"},
        "auto_approve": True,
    }
    assert run.idempotency_key == "oomrl-alert-idem-1"
    assert set(run.tags) == {"oomrl", "webhook", "alert:idem-1"}
    timed = DeploymentLauncher(
        "repair-launch-test/repair", auto_approve=False, api=harness_api, approval_timeout_s=90
    )
    third = asyncio.run(timed.launch(alert("idem-3"), "idem-3"))

    async def timeout_of(run_id: str) -> Any:
        async with get_client() as client:
            return (await client.read_flow_run(uuid.UUID(run_id))).parameters.get(
                "approval_timeout_s"
            )

    assert asyncio.run(timeout_of(third.flow_run_id)) == 90


def test_missing_deployment_is_a_launch_error(harness_api: PrefectApi) -> None:
    with pytest.raises(LaunchError, match="not found"):
        asyncio.run(
            DeploymentLauncher("nope/repair", auto_approve=False, api=harness_api).launch(
                alert("a"), "a"
            )
        )


def test_event_launcher_emits_with_a_stable_id(harness_api: PrefectApi) -> None:
    import time

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    launcher = EventLauncher(api=harness_api)
    first = asyncio.run(launcher.launch(alert("ev-1", "launch-test"), "ev-1"))
    again = asyncio.run(launcher.launch(alert("ev-1", "launch-test"), "ev-1"))
    assert first.event_id == again.event_id and first.flow_run_id is None
    query = EventFilter(
        event=EventNameFilter(name=["oomrl.loss.alert"]),
        resource=EventResourceFilter(id=["oomrl.account.launch-test"]),
    )
    deadline = time.monotonic() + 30
    with get_client(sync_client=True) as client:
        while (
            not (events := client.read_events(filter=query, limit=10).events)
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
    assert events and str(events[0].id) == first.event_id
    assert events[0].payload == {"alert_id": "ev-1", "account": "launch-test"}
    # labelled as the diagnostics label theirs: a minimal alert is a warning asking for a repair
    assert (events[0].resource["oomrl.alert.severity"], events[0].resource["oomrl.repair"]) == (
        "warning",
        "requested",
    )


def test_missing_api_url_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with pytest.raises(LaunchError, match="PREFECT_API_URL is not set"):
        asyncio.run(EventLauncher().launch(alert("c"), "c"))


def test_api_key_becomes_a_bearer_header() -> None:
    client = PrefectApi(api_url="http://127.0.0.1:1/api/", api_key="k3y").client()
    assert (
        client._client.headers["Authorization"] == "Bearer k3y"
        and str(client.api_url) == "http://127.0.0.1:1/api/"
    )


def test_unreachable_server_is_a_launch_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{port}/api")
    with pytest.raises(LaunchError, match="could not start"):
        asyncio.run(DeploymentLauncher("repair/repair", auto_approve=False).launch(alert("b"), "b"))
    with pytest.raises(LaunchError, match="could not emit"):
        asyncio.run(EventLauncher().launch(alert("b"), "b"))
    with pytest.raises(LaunchError, match="could not read flow run"):
        asyncio.run(DeploymentLauncher("repair/repair", auto_approve=False).run_state("some-run"))


def test_launcher_for_mode() -> None:
    assert isinstance(launcher_for("event", "repair/repair", False), EventLauncher)
    chosen = launcher_for("deployment", "x/y", True)
    assert (
        isinstance(chosen, DeploymentLauncher)
        and chosen.deployment == "x/y"
        and chosen.auto_approve
    )
    assert chosen.approval_timeout_s is None
    assert launcher_for("deployment", "x/y", False, 90).approval_timeout_s == 90  # type: ignore[union-attr]


def test_redelivery_after_a_crash_starts_a_new_run_on_prefect(
    harness_api: PrefectApi, config: Any, store_url: str, settings: Any
) -> None:
    """The webhook reads the run's state from Prefect's REST API and relaunches only a crashed
    run."""
    import json

    from fastapi.testclient import TestClient
    from prefect.client.orchestration import get_client

    from oomrl.webhook.app import create_app
    from oomrl.webhook.deliveries import DeliveryStore
    from tests.webhook.conftest import signed

    _make_deployment("repair-relaunch-test")
    launcher = DeploymentLauncher(
        "repair-relaunch-test/repair", auto_approve=False, api=harness_api
    )
    body = json.dumps({"alert_id": "crash-1", "account": "paper"}).encode()
    app = create_app(config, launcher, DeliveryStore(store_url), settings)
    with TestClient(app) as client:
        first = client.post("/hooks/loss-alert", content=body, headers=signed(body)).json()
        status = asyncio.run(launcher.run_state(first["flow_run_id"]))
        assert status is not None and status.type == "SCHEDULED" and status.since is not None
        duplicate = client.post("/hooks/loss-alert", content=body, headers=signed(body))
        assert (
            duplicate.status_code == 200 and duplicate.json()["flow_run_id"] == first["flow_run_id"]
        )

        asyncio.run(launcher.mark_crashed(first["flow_run_id"], "its worker died"))
        crashed = asyncio.run(launcher.run_state(first["flow_run_id"]))
        assert crashed is not None and crashed.type == "CRASHED"

        async def message(run_id: str) -> str | None:
            async with get_client() as prefect:
                state = (await prefect.read_flow_run(uuid.UUID(run_id))).state
                return state.message if state else None

        assert asyncio.run(message(first["flow_run_id"])) == "its worker died"
        again = client.post("/hooks/loss-alert", content=body, headers=signed(body))
    assert again.status_code == 202, again.text
    assert again.json()["replaces"] == first["flow_run_id"] != again.json()["flow_run_id"]

    async def key(run_id: str) -> str | None:
        async with get_client() as prefect:
            return (await prefect.read_flow_run(uuid.UUID(run_id))).idempotency_key

    assert (
        asyncio.run(key(again.json()["flow_run_id"]))
        == f"oomrl-alert-crash-1-after-{first['flow_run_id']}"
    )
    assert asyncio.run(launcher.run_state(str(uuid.uuid4()))) is None
    assert asyncio.run(EventLauncher(api=harness_api).run_state("anything")) is None


def test_redelivery_after_the_run_was_deleted_starts_a_new_run_on_prefect(
    harness_api: PrefectApi, config: Any, store_url: str, settings: Any
) -> None:
    """A run deleted in the UI is gone (Prefect answers 404): the next delivery of its alert starts
    a new one, instead of answering "duplicate" for ever with the id of a run that no longer
    exists."""
    import json

    from fastapi.testclient import TestClient
    from prefect.client.orchestration import get_client

    from oomrl.webhook.app import create_app
    from oomrl.webhook.deliveries import DeliveryStore
    from tests.webhook.conftest import signed

    _make_deployment("repair-deleted-test")
    launcher = DeploymentLauncher("repair-deleted-test/repair", auto_approve=False, api=harness_api)
    body = json.dumps({"alert_id": "deleted-1", "account": "paper"}).encode()
    with TestClient(create_app(config, launcher, DeliveryStore(store_url), settings)) as client:
        first = client.post("/hooks/loss-alert", content=body, headers=signed(body)).json()

        async def delete() -> None:
            async with get_client() as prefect:
                await prefect.delete_flow_run(uuid.UUID(first["flow_run_id"]))

        asyncio.run(delete())
        assert asyncio.run(launcher.run_state(first["flow_run_id"])) is None
        again = client.post("/hooks/loss-alert", content=body, headers=signed(body))
        assert again.status_code == 202, again.text
        assert again.json()["replaces"] == first["flow_run_id"] != again.json()["flow_run_id"]
        status = asyncio.run(launcher.run_state(again.json()["flow_run_id"]))
        assert status is not None and status.type == "SCHEDULED"  # a real run, on the real server
        assert (
            client.post("/hooks/loss-alert", content=body, headers=signed(body)).status_code == 200
        )
