"""Flow `cycle`: the outer loop as one run — ingest → rebalance → attribution → diagnostics → repair."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from prefect import flow, get_run_logger

from flows.attribution import attribution
from flows.diagnostics import loss_diagnostics
from flows.ingest import ingest_market_data
from flows.rebalance import weekly_rebalance
from flows.repair import repair
from oomrl.build_info import flow_version
from oomrl.config import get_settings
from oomrl.market import calendar
from tasks.cycle import booked_sessions, publish_cycle, rebalance_is_due, repair_route

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
MIN_REPORT_SESSIONS = 3  # the CAPM regression of the report needs more than two observations


@flow(name="cycle", version=FLOW_VERSION, retries=1, retry_delay_seconds=60, log_prints=True)
def cycle(account: str | None = None, as_of: date | None = None, source: str = "sample",
          ingest: bool = True, repair_mode: Literal["auto", "event", "inline", "off"] = "auto", auto_approve: bool = False,
          provider: str | None = None, home: str | None = None) -> dict[str, Any]:
    """One session of the outer loop for `account` (default: the latest session).

    Repairs start through the `oomrl.loss.alert` event the diagnostics emit when a server holds the
    `repair` deployment (`auto` → `event`), or here as subflows otherwise (`inline`). A retry of
    this flow is safe: the ledger books a session at most once.
    """
    from oomrl.portfolio.service import last_session

    logger = get_run_logger()
    name = account or get_settings(**({"home": home} if home else {})).account
    day = as_of or last_session()
    summary: dict[str, Any] = {"account": name, "as_of": str(day)}
    if ingest:
        summary["ingest"] = ingest_market_data(source=source, home=home)
    else:  # the data is already in the store (e.g. the ingest-daily deployment ran)
        summary["ingest"] = {"skipped": "ingest=False"}
    if not calendar.is_session(day):
        summary["rebalance"] = {"skipped": f"{day} is not an XSHG session"}
    elif rebalance_is_due(name, day, home):
        summary["rebalance"] = weekly_rebalance(account=name, as_of=day, home=home)
    else:
        summary["rebalance"] = {"skipped": "not due for the active strategy, or already booked"}
    if booked_sessions(name, home) < MIN_REPORT_SESSIONS:
        summary["attribution"] = {"skipped": f"fewer than {MIN_REPORT_SESSIONS} booked sessions"}
    else:
        # no retry wait here: a report is not worth holding up the loop (the cycle itself retries)
        report = attribution.with_options(retries=0)(account=name, home=home, return_state=True)
        if report.is_completed():
            summary["attribution"] = {key: report.result().get(key) for key in ("html", "markdown")}
        else:
            logger.warning("attribution failed: %s", report.message)
            summary["attribution"] = {"failed": report.message}
    autopsies = loss_diagnostics(account=name, as_of=str(day), home=home)
    summary["diagnostics"] = [{"alert_id": a["alert_id"], "severity": a["severity"],
                               "rule": a["trigger"]["rule"]} for a in autopsies]
    route = repair_route(repair_mode) if autopsies else "off"
    if route == "inline":  # one repair per cycle, for the most severe alert: the others share its cause
        worst = max(autopsies, key=lambda a: a["severity"] == "critical")
        outcome = repair(autopsy=worst, auto_approve=auto_approve, provider=provider, account=name)
        summary["repair"] = {"route": route, "alert_id": worst["alert_id"],
                             **{key: outcome.get(key) for key in ("status", "step", "reason", "run_dir")}}
    else:
        summary["repair"] = {"route": route, "alerts": len(autopsies)}
    publish_cycle(summary)
    return summary
