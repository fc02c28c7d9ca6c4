"""The webhook's seam to whatever starts the repair: the `Launcher` protocol and what it returns.

The launchers that talk to Prefect live in orchestration/launch.py. oomrl/ never imports Prefect
(docs/architecture.md §2). So the webhook is handed its launcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from oomrl.diagnostics.autopsy import Autopsy, RepairInput
from oomrl.diagnostics.repair_policy import alert_resource

API_TIMEOUT_S = 30.0  # one Prefect call at most.
# Prefect's client pauses 2, 4 and 8 s (its back-off, give or take its jitter).
# It pauses while the server answers 503 (its database busy).
# A launcher retries that many times, no more.
BUSY_RETRIES_S = (2.0, 4.0, 8.0)


@dataclass(frozen=True)
class RunStatus:
    """A flow run's state type (COMPLETED, RUNNING, ...) and since when (naive UTC), as Prefect
    says."""

    type: str
    since: datetime | None = None


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
    """The event's resource, labelled as the diagnostics label theirs.

    So the repair trigger matches it. One label is the alert's severity. A minimal alert counts as
    the warning the repair completes it to. The other is the verdict `requested`. A delivered alert
    is a request; the webhook already keeps it to one run.
    """
    severity = autopsy.severity if isinstance(autopsy, Autopsy) else "warning"
    return alert_resource(autopsy.account, severity, "requested")
