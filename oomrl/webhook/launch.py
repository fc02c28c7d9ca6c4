"""Turn an accepted loss alert into work: start the `repair` deployment, or emit `oomrl.loss.alert`.

Talks to the Prefect server over its REST API with httpx, so oomrl/ never imports Prefect
(docs/architecture.md §2).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from oomrl.diagnostics.autopsy import Autopsy, RepairInput, input_json
from oomrl.diagnostics.repair_policy import alert_resource
from oomrl.errors import OomrlError
from oomrl.events import LOSS_ALERT_EVENT
from oomrl.events import event_id as alert_event_id
from oomrl.run_tags import alert_tag
from oomrl.settings import RuntimeSettings

API_TIMEOUT_S = 30.0
BUSY_RETRIES_S = (1.0, 2.0, 4.0)


class LaunchError(OomrlError):
    """The repair could not be started (Prefect unreachable, deployment missing)."""


@dataclass(frozen=True)
class RunStatus:
    """A flow run's state type (COMPLETED, RUNNING, ...) and since when (naive UTC), as Prefect
    says."""

    type: str
    since: datetime | None = None


def _naive_utc(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    moment = datetime.fromisoformat(stamp)
    return (moment.astimezone(UTC) if moment.tzinfo else moment).replace(tzinfo=None)


@dataclass(frozen=True)
class Launch:
    """What an alert started: a flow run (deployment mode) or an event (event mode)."""

    flow_run_id: str | None
    event_id: str | None


class Launcher(Protocol):
    """Starts the repair for one loss alert, and says how a run it started ended."""

    async def launch(
        self, autopsy: RepairInput, alert_id: str, attempt: str | None = None
    ) -> Launch: ...

    async def run_state(self, flow_run_id: str) -> RunStatus | None: ...

    async def mark_crashed(self, flow_run_id: str, message: str) -> None: ...


def alert_event_resource(autopsy: RepairInput) -> dict[str, str]:
    """The event's resource, labelled as the diagnostics label theirs, so the repair trigger matches
    it: the alert's severity (a minimal alert counts as the warning the repair completes it to) and
    the verdict `requested` (a delivered alert is a request; the webhook already keeps it to one
    run)."""
    severity = autopsy.severity if isinstance(autopsy, Autopsy) else "warning"
    return alert_resource(autopsy.account, severity, "requested")


class PrefectApi:
    """The few Prefect REST calls the webhook needs; URL and key from PREFECT_API_URL /
    PREFECT_API_KEY."""

    def __init__(self, api_url: str | None = None, api_key: str | None = None) -> None:
        runtime = RuntimeSettings() if api_url is None or api_key is None else None
        self.api_url = (api_url or (runtime and runtime.prefect_api_url) or "").rstrip("/")
        self.api_key = api_key if api_key is not None else runtime and runtime.prefect_api_key

    def client(self) -> httpx.AsyncClient:
        if not self.api_url:
            raise LaunchError(
                "PREFECT_API_URL is not set: the webhook does not know which Prefect server to use"
            )
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(base_url=self.api_url, headers=headers, timeout=API_TIMEOUT_S)


async def _post_patiently(
    client: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> httpx.Response:
    """POST, again after 1, 2 and 4 s while Prefect answers 503 (its database busy); the
    idempotency key makes a repeated creation the same run."""
    for pause in BUSY_RETRIES_S:
        answer = await client.post(url, json=body)
        if answer.status_code != 503:
            return answer
        await asyncio.sleep(pause)
    return await client.post(url, json=body)


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

    async def launch(
        self, autopsy: RepairInput, alert_id: str, attempt: str | None = None
    ) -> Launch:
        """A run of the deployment; `attempt` makes a new idempotency key (a relaunch after a
        crash)."""
        flow_name, _, name = self.deployment.partition("/")
        key = f"oomrl-alert-{alert_id}" + (f"-after-{attempt}" if attempt else "")
        try:
            async with self.api.client() as client:
                found = await client.get(
                    f"/deployments/name/{quote(flow_name, safe='')}/{quote(name, safe='')}"
                )
                if found.status_code == 404:
                    raise LaunchError(
                        f"deployment {self.deployment!r} not found on the Prefect server "
                        "(deploy prefect.yaml, e.g. `oomrl server up`)"
                    )
                found.raise_for_status()
                parameters: dict[str, Any] = {
                    "autopsy": input_json(autopsy),
                    "auto_approve": self.auto_approve,
                }
                if self.approval_timeout_s is not None:
                    parameters["approval_timeout_s"] = self.approval_timeout_s
                created = await _post_patiently(
                    client,
                    f"/deployments/{found.json()['id']}/create_flow_run",
                    {
                        "parameters": parameters,
                        "idempotency_key": key,
                        "tags": ["oomrl", "webhook", alert_tag(alert_id)],
                    },
                )
                created.raise_for_status()
        except LaunchError:
            raise
        except Exception as exc:  # network, HTTP 5xx: the sender should retry later
            raise LaunchError(
                f"could not start {self.deployment!r}: {type(exc).__name__}: {exc}"
            ) from exc
        return Launch(flow_run_id=str(created.json()["id"]), event_id=None)

    async def run_state(self, flow_run_id: str) -> RunStatus | None:
        """The run's state type (COMPLETED, CRASHED, ...) and time, None when Prefect does not know
        the run."""
        try:
            async with self.api.client() as client:
                found = await client.get(f"/flow_runs/{quote(flow_run_id, safe='')}")
                if found.status_code == 404:
                    return None
                found.raise_for_status()
        except LaunchError:
            raise
        except Exception as exc:
            raise LaunchError(
                f"could not read flow run {flow_run_id}: {type(exc).__name__}: {exc}"
            ) from exc
        state = found.json().get("state") or {}
        return (
            RunStatus(str(state["type"]), _naive_utc(state.get("timestamp")))
            if state.get("type")
            else None
        )

    async def mark_crashed(self, flow_run_id: str, message: str) -> None:
        """Say in the runs list that a silent run is gone (its process died without a final
        state)."""
        body = {"state": {"type": "CRASHED", "name": "Crashed", "message": message}, "force": True}
        try:
            async with self.api.client() as client:
                answer = await client.post(
                    f"/flow_runs/{quote(flow_run_id, safe='')}/set_state", json=body
                )
                answer.raise_for_status()
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
        event_id = str(alert_event_id(alert_id))
        event = {
            "id": event_id,
            "occurred": datetime.now(UTC).isoformat(),
            "event": LOSS_ALERT_EVENT,
            "resource": alert_event_resource(autopsy),
            "related": [],
            "payload": input_json(autopsy),
        }
        try:
            async with self.api.client() as client:
                sent = await client.post("/events", json=[event])
                sent.raise_for_status()
        except LaunchError:
            raise
        except Exception as exc:
            raise LaunchError(
                f"could not emit {LOSS_ALERT_EVENT}: {type(exc).__name__}: {exc}"
            ) from exc
        return Launch(flow_run_id=None, event_id=event_id)

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
