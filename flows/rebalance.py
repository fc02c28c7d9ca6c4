"""The weekly rebalance flow: resolve the active strategy version, rebalance once, publish, alert on halt."""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow

from oomrl.build_info import flow_version
from oomrl.config import get_settings
from oomrl.market import calendar
from tasks.portfolio import (
    emit_halted,
    publish_rebalance_artifacts,
    rebalance_account,
    resolve_version,
    tag_run,
)

FLOW_VERSION = flow_version()  # the code's version; the strategy version is the run's tag


@flow(name="weekly-rebalance", version=FLOW_VERSION, retries=1, retry_delay_seconds=30, log_prints=True)
def weekly_rebalance(account: str | None = None, as_of: date | None = None, dry_run: bool = False,
                     home: str | None = None) -> dict[str, Any]:
    """Rebalance `account` on `as_of` (default: the latest session) with its active strategy version."""
    from oomrl.portfolio.service import last_session

    name = account or get_settings(**({"home": home} if home else {})).account
    day = as_of or last_session()
    if not calendar.is_session(day):
        print(f"{day} is not an XSHG session: nothing to do")
        return {"account": name, "as_of": str(day), "skipped": "not a session"}
    strategy = resolve_version(name, home, dry_run)
    tag_run(strategy["name"], strategy["label"])
    result = rebalance_account(name, day, dry_run, home)
    publish_rebalance_artifacts(result, home, strategy["label"])
    summary = result["summary"]
    if summary["halted"] and summary["committed"]:
        emit_halted(summary)
        print(f"{name} HALTED by the kill switch on {day}")
    print(f"rebalance of {name} on {day}: {summary}")
    return summary
