"""The loss-diagnostics flow: alert rules → autopsies → `oomrl.loss.alert` events → the ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from prefect import flow

from oomrl.build_info import flow_version
from oomrl.config import get_settings
from tasks.attribution import diagnose_and_alert, publish_diagnosis

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
MARKET_TZ = ZoneInfo("Asia/Shanghai")


@flow(name="loss-diagnostics", version=FLOW_VERSION, retries=1, retry_delay_seconds=30, log_prints=True)
def loss_diagnostics(account: str | None = None, as_of: str | None = None, config_file: str | None = None,
                     home: str | None = None) -> list[dict[str, Any]]:
    """Diagnose `account` on `as_of` (default: today in Shanghai; the last NAV on or before it is used)."""
    name = account or get_settings(**({"home": home} if home else {})).account
    day = as_of or datetime.now(MARKET_TZ).date().isoformat()
    autopsies = diagnose_and_alert(name, day, config_file, home)
    publish_diagnosis(name, day, autopsies)
    for autopsy in autopsies:
        print(f"{autopsy['severity']} {autopsy['trigger']['rule']}: {autopsy['diagnostics']['root_cause']}")
    return autopsies
