"""Tasks of the `cycle` flow: is a rebalance due, how does a repair start, and the cycle's artifact."""

from __future__ import annotations

import json
from datetime import date
from typing import Any, Literal

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from oomrl.config import get_settings

RepairRoute = Literal["event", "inline", "off"]
REPAIR_DEPLOYMENT = "repair/repair"


@task(name="rebalance-due", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5)
def rebalance_is_due(account: str, day: date, home: str | None = None) -> bool:
    """Whether the account's active strategy trades on `day` (daily: every session; weekly: the first)."""
    from oomrl.portfolio.service import open_ledger, resolve_strategy

    settings = get_settings(**({"home": home} if home else {}))
    ledger = open_ledger(settings)
    ledger.open_account(account, settings.initial_cash)
    last = ledger.account(account).last_date
    if last is not None and day <= last:
        return False
    return bool(resolve_strategy(settings, ledger, account).strategy.rebalance_due(day, last))


@task(name="booked-sessions", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5)
def booked_sessions(account: str, home: str | None = None) -> int:
    """How many sessions of NAV the ledger holds for the account (a report needs a few)."""
    from oomrl.portfolio.service import open_ledger

    return len(open_ledger(get_settings(**({"home": home} if home else {}))).nav_frame(account))


@task(name="repair-route", cache_policy=NO_CACHE)
def repair_route(mode: str) -> RepairRoute:
    """`auto`: by event when a server holds the `repair` deployment (its trigger starts the run), else inline."""
    if mode in ("event", "inline", "off"):
        return mode  # type: ignore[return-value]
    if mode != "auto":
        raise ValueError(f"repair_mode must be auto, event, inline or off, got {mode!r}")
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        return "inline"  # ephemeral API: no worker, no trigger
    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(REPAIR_DEPLOYMENT)
        except ObjectNotFound:
            return "inline"
    return "event"


@task(name="publish-cycle", cache_policy=NO_CACHE)
def publish_cycle(summary: dict[str, Any]) -> None:
    """One markdown artifact saying what each stage did."""
    lines = [f"# Cycle of {summary['account']} on {summary['as_of']}", ""]
    for stage in ("ingest", "rebalance", "attribution", "diagnostics", "repair"):
        value = summary.get(stage)
        lines.append(f"## {stage}\n\n```json\n{json.dumps(value, indent=1, default=str)[:4000]}\n```\n")
    create_markdown_artifact(markdown="\n".join(lines), key=f"cycle-{summary['account']}".lower().replace("_", "-"),
                             description=f"cycle of {summary['account']} on {summary['as_of']}")
