"""Turn an accepted loss alert into work through Prefect's client: a `repair` run, or an event.

The webhook (oomrl/webhook/app.py) knows only the `Launcher` seam of oomrl/webhook/launch.py.
These are the launchers that talk to the Prefect server.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from oomrl.diagnostics.autopsy import RepairInput, input_json
from oomrl.errors import LaunchError
from oomrl.events import LOSS_ALERT_EVENT
from oomrl.events import event_id as alert_event_id
from oomrl.run_tags import alert_tag
from oomrl.settings import get_settings
from oomrl.webhook.launch import (
    API_TIMEOUT_S,
    BUSY_RETRIES_S,
    Launch,
    Launcher,
    RunStatus,
    alert_event_resource,
)

if TYPE_CHECKING:
    from prefect.client.orchestration import PrefectClient
    from prefect.events.clients import EventsClient


class PrefectApi:
    """Which Prefect server the launchers use: PREFECT_API_URL and PREFECT_API_KEY."""

    def __init__(self, api_url: str | None = None, api_key: str | None = None) -> None:
        runtime = get_settings().runtime if api_url is None or api_key is None else None
        self.api_url = (api_url or (runtime and runtime.prefect_api_url) or "").rstrip("/")
        self.api_key = api_key if api_key is not None else runtime and runtime.prefect_api_key

    def url(self) -> str:
        """The API URL; a named error when unset (Prefect would start a throwaway server)."""
        if not self.api_url:
            raise LaunchError(
                "PREFECT_API_URL is not set: the webhook does not know which Prefect server to use"
            )
        return self.api_url

    def client(self) -> PrefectClient:
        """Prefect's client for this server: it retries while Prefect answers 503."""
        from prefect.client.orchestration import PrefectClient

        return PrefectClient(
            self.url(), api_key=self.api_key or None, httpx_settings={"timeout": API_TIMEOUT_S}
        )

    def events(self) -> EventsClient:
        """Prefect's events client for this server (Prefect Cloud's when there is a key).

        It does not reconnect. An unreachable server is the sender's retry, as a refused POST was.
        It waits for the server to confirm each event.
        """
        from prefect.events.clients import PrefectCloudEventsClient, PrefectEventsClient

        if self.api_key:
            return PrefectCloudEventsClient(
                api_url=self.url(),
                api_key=self.api_key,
                reconnection_attempts=0,
                checkpoint_every=1,
            )
        return PrefectEventsClient(api_url=self.url(), reconnection_attempts=0, checkpoint_every=1)


@contextmanager
def patient() -> Iterator[None]:
    """Prefect's client retries a 503 (its database busy) with its own back-off.

    It retries as many times as BUSY_RETRIES_S has pauses. So a launch stays within the webhook's
    LAUNCH_WAIT.
    """
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    with temporary_settings(updates={PREFECT_CLIENT_MAX_RETRIES: len(BUSY_RETRIES_S)}):
        yield


def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return (moment.astimezone(UTC) if moment.tzinfo else moment).replace(tzinfo=None)


def idempotency_key(alert_id: str, attempt: str | None = None) -> str:
    """One run per alert id; `attempt` (the run a relaunch replaces) makes a new one."""
    return f"oomrl-alert-{alert_id}" + (f"-after-{attempt}" if attempt else "")


class DeploymentLauncher:
    """Creates a run of the `repair` deployment with the alert id as the idempotency key."""

    def __init__(
        self,
        deployment: str,
        auto_approve: bool,
        api: PrefectApi | None = None,
        approval_timeout_s: int | None = None,
    ) -> None:
        self.deployment = deployment
        self.auto_approve = auto_approve
        self.api = api or PrefectApi()
        self.approval_timeout_s = approval_timeout_s

    def parameters(self, autopsy: RepairInput) -> dict[str, Any]:
        """The run's parameters: the autopsy, the approval mode and its timeout when set."""
        parameters: dict[str, Any] = {
            "autopsy": input_json(autopsy),
            "auto_approve": self.auto_approve,
        }
        if self.approval_timeout_s is not None:
            parameters["approval_timeout_s"] = self.approval_timeout_s
        return parameters

    async def launch(
        self, autopsy: RepairInput, alert_id: str, attempt: str | None = None
    ) -> Launch:
        """A run of the deployment.

        `attempt` makes a new idempotency key, for a relaunch after a crash.
        """
        from prefect.exceptions import ObjectNotFound

        try:
            with patient():
                async with self.api.client() as client:
                    try:
                        found = await client.read_deployment_by_name(self.deployment)
                    except ObjectNotFound:
                        raise LaunchError(
                            f"deployment {self.deployment!r} not found on the Prefect server "
                            "(deploy prefect.yaml, e.g. `oomrl server up`)"
                        ) from None
                    created = await client.create_flow_run_from_deployment(
                        found.id,
                        parameters=self.parameters(autopsy),
                        idempotency_key=idempotency_key(alert_id, attempt),
                        tags=["oomrl", "webhook", alert_tag(alert_id)],
                    )
        except LaunchError:
            raise
        except Exception as exc:  # network, HTTP 5xx: the sender should retry later
            raise LaunchError(
                f"could not start {self.deployment!r}: {type(exc).__name__}: {exc}"
            ) from exc
        return Launch(flow_run_id=str(created.id), event_id=None)

    async def run_state(self, flow_run_id: str) -> RunStatus | None:
        """The run's state type (COMPLETED, CRASHED, ...) and time.

        None when Prefect does not know the run.
        """
        from prefect.exceptions import ObjectNotFound

        try:
            with patient():
                async with self.api.client() as client:
                    run = await client.read_flow_run(uuid.UUID(flow_run_id))
        except ObjectNotFound:
            return None
        except LaunchError:
            raise
        except Exception as exc:
            raise LaunchError(
                f"could not read flow run {flow_run_id}: {type(exc).__name__}: {exc}"
            ) from exc
        state = run.state
        return RunStatus(state.type.value, _naive_utc(state.timestamp)) if state else None

    async def mark_crashed(self, flow_run_id: str, message: str) -> None:
        """Say in the runs list that a silent run is gone.

        Its process died without a final state.
        """
        from prefect.states import Crashed

        try:
            with patient():
                async with self.api.client() as client:
                    await client.set_flow_run_state(
                        uuid.UUID(flow_run_id), state=Crashed(message=message), force=True
                    )
        except Exception as exc:
            raise LaunchError(
                f"could not mark run {flow_run_id} crashed: {type(exc).__name__}: {exc}"
            ) from exc


class EventLauncher:
    """Emits `oomrl.loss.alert`; the `repair` deployment's trigger starts the run."""

    def __init__(self, api: PrefectApi | None = None) -> None:
        self.api = api or PrefectApi()

    async def launch(
        self, autopsy: RepairInput, alert_id: str, attempt: str | None = None
    ) -> Launch:
        """Emit the event under an id fixed by the alert id.

        So a repeat is the same event.
        """
        from prefect.events import Event

        event_id = alert_event_id(alert_id)
        event = Event(
            id=event_id,
            occurred=datetime.now(UTC),
            event=LOSS_ALERT_EVENT,
            resource=alert_event_resource(autopsy),
            related=[],
            payload=input_json(autopsy),
        )
        try:
            async with self.api.events() as events:
                await events.emit(event)
        except LaunchError:
            raise
        except Exception as exc:
            raise LaunchError(
                f"could not emit {LOSS_ALERT_EVENT}: {type(exc).__name__}: {exc}"
            ) from exc
        return Launch(flow_run_id=None, event_id=str(event_id))

    async def run_state(self, flow_run_id: str) -> RunStatus | None:
        """Unknown: the deployment's trigger starts the run, so no run id is recorded here."""
        return None

    async def mark_crashed(self, flow_run_id: str, message: str) -> None:
        """Nothing to mark: event mode knows no run ids."""


def launcher_for(
    mode: str, deployment: str, auto_approve: bool, approval_timeout_s: int | None = None
) -> Launcher:
    """The launcher for the configured mode."""
    if mode == "event":
        return EventLauncher()
    return DeploymentLauncher(deployment, auto_approve, approval_timeout_s=approval_timeout_s)
