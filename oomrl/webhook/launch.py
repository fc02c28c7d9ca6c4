"""Turn an accepted loss alert into work: start the `repair` deployment, or emit `oomrl.loss.alert`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from oomrl.errors import OomrlError

LOSS_ALERT_EVENT = "oomrl.loss.alert"
# The namespace tasks/attribution.py uses too: one alert id is one event id whichever path emits it.
_EVENT_NAMESPACE = uuid.UUID("5b0f3f0e-6f6d-4d2c-9a59-6f6f6d726c21")


class LaunchError(OomrlError):
    """The repair could not be started (Prefect unreachable, deployment missing)."""


@dataclass(frozen=True)
class Launch:
    """What an alert started: a flow run (deployment mode) or an event (event mode)."""

    flow_run_id: str | None
    event_id: str | None


class Launcher(Protocol):
    """Starts the repair for one loss alert."""

    async def launch(self, autopsy: dict[str, Any], alert_id: str) -> Launch: ...


def account_resource(account: str) -> dict[str, str]:
    """The Prefect resource an account's events are about (DESIGN §4.5)."""
    return {"prefect.resource.id": f"oomrl.account.{account}", "prefect.resource.name": account}


class DeploymentLauncher:
    """Creates a run of the `repair` deployment with the alert id as the idempotency key."""

    def __init__(self, deployment: str, auto_approve: bool) -> None:
        self.deployment = deployment
        self.auto_approve = auto_approve

    async def launch(self, autopsy: dict[str, Any], alert_id: str) -> Launch:
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        try:
            async with get_client() as client:
                deployment = await client.read_deployment_by_name(self.deployment)
                run = await client.create_flow_run_from_deployment(
                    deployment.id,
                    parameters={"autopsy": autopsy, "auto_approve": self.auto_approve},
                    idempotency_key=f"oomrl-alert-{alert_id}",
                    tags=["oomrl", "webhook", f"alert:{alert_id}"[:100]],
                )
        except ObjectNotFound as exc:
            raise LaunchError(
                f"deployment {self.deployment!r} not found on the Prefect server "
                "(deploy prefect.yaml, e.g. `oomrl server up`)"
            ) from exc
        except Exception as exc:  # network, HTTP 5xx: the sender should retry later
            raise LaunchError(f"could not start {self.deployment!r}: {type(exc).__name__}: {exc}") from exc
        return Launch(flow_run_id=str(run.id), event_id=None)


class EventLauncher:
    """Emits `oomrl.loss.alert`; the `repair` deployment's trigger starts the run."""

    async def launch(self, autopsy: dict[str, Any], alert_id: str) -> Launch:
        from prefect.events import emit_event

        account = str(autopsy.get("account") or "unknown")
        event_id = uuid.uuid5(_EVENT_NAMESPACE, alert_id)
        event = emit_event(event=LOSS_ALERT_EVENT, resource=account_resource(account),
                           payload=autopsy, id=event_id)
        if event is None:
            raise LaunchError("events are disabled in this Prefect configuration; cannot emit the alert")
        return Launch(flow_run_id=None, event_id=str(event.id))


def launcher_for(mode: str, deployment: str, auto_approve: bool) -> Launcher:
    """The launcher for the configured mode."""
    if mode == "event":
        return EventLauncher()
    return DeploymentLauncher(deployment, auto_approve)
