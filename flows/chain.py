"""The daily chain: ingest, shadows, marks, diagnostics, alerts, attribution, probation decisions.

The subflows run in order: ingest → trade the shadow books → mark every active account →
loss diagnostics → alerts → attribution. Then the chain decides the probations whose forward
sessions are done.

Alerts that the repair policy lets through start the `repair` deployment by its event trigger.
The weekly rebalance is its own deployment, scheduled after the day's marking.
"""

from __future__ import annotations

from datetime import date
from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.states import Completed, Failed, State

from flows.attribution import attribution
from flows.diagnostics import loss_diagnostics
from flows.ingest import ingest_market_data
from oomrl.build_info import flow_version
from oomrl.market import calendar
from oomrl.repair.probation import is_shadow
from tasks.chain import emit_halts, last_stored_session, mark_accounts, publish_chain
from tasks.expected_ends import configure_flow_logging
from tasks.probation import decide_probations, trade_shadows

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs
NO_NEW_SESSION = "NoNewSession"
NOT_A_SESSION = "NotASession"


def _ended(summary: dict[str, Any], name: str, message: str) -> State:
    """A Completed state named for why the day needed nothing: nothing traded, nothing failed."""
    summary["outcome"] = f"{name}: {message}"
    publish_chain(summary)
    return Completed(name=name, message=message, data=summary)


# retries=0: a failed stage is a final answer (bad data, a refusal).
# The tasks retry what is transient.
@flow(name="daily-chain", version=FLOW_VERSION, retries=0, log_prints=True)
def daily_chain(
    as_of: date | None = None,
    source: str = "sample",
    ingest: bool = True,
    alert_config: str | None = None,
    home: str | None = None,
) -> dict[str, Any] | State:
    """The day after the close: ingest, mark every active account, diagnose and alert, report.

    Args:
        as_of: The session to mark, a date YYYY-MM-DD. Empty: the last session in the market store
            after the ingest.
        source: Where the ingest takes bars from. `sample` is the bundled data, offline. `akshare`
            or `yfinance` are live.
        ingest: Ingest first. Off: the store already holds the day (e.g. the ingest-daily
            deployment ran).
        alert_config: Optional alert thresholds (TOML, YAML or JSON) on the worker; empty: the
            defaults.
        home: Internal: OOMRL_HOME on the worker (folder). Leave empty to use the worker's setting.
    """
    logger = get_run_logger()
    summary: dict[str, Any] = {}
    summary["ingest"] = (
        ingest_market_data(source=source, home=home) if ingest else {"skipped": "ingest=False"}
    )
    day = as_of or last_stored_session(home)
    summary["as_of"] = str(day)
    if not calendar.is_session(day):  # a holiday on the Mon–Fri schedule
        return _ended(
            summary, NOT_A_SESSION, f"{day} is not an XSHG session: nothing traded, nothing failed"
        )
    # Challengers on probation trade before the marks
    summary["shadow_books"] = trade_shadows(day, home)
    marking = mark_accounts(day, home)
    summary["marking"] = marking.summary()
    emit_halts(marking.halted)  # the kill switch tripped on a marked session: say so today
    if nothing_new := marking.nothing_new():
        return _ended(summary, NO_NEW_SESSION, nothing_new)
    summary["attribution"], summary["diagnostics"] = {}, {}
    failures = [f"marking of {account} ({error})" for account, error in marking.errors.items()]
    requested = 0
    for outcome in marking.outcomes:
        account = outcome.account
        # A shadow book is judged by its probation
        if not outcome.marked or is_shadow(account):
            continue
        # Diagnostics first, so the report draws and lists the alerts this very run raised.
        judged = loss_diagnostics(
            account=account, as_of=day, start=outcome.marked[0], config_file=alert_config, home=home
        )
        summary["diagnostics"][account] = [j.summary() for j in judged]
        requested += sum(j.decision.requested for j in judged)
        report = attribution(account=account, home=home, return_state=True)
        if report.is_completed():
            # The task returns a dict; a State only if asked
            result = cast(dict[str, Any], report.result())
            summary["attribution"][account] = {
                key: result.get(key) for key in ("html", "skipped") if key in result
            }
        else:  # a report that fails is said, and the alerts are already out
            logger.warning("attribution of %s failed: %s", account, report.message)
            summary["attribution"][account] = {"failed": report.message}
            failures.append(f"attribution of {account}")
    summary["probations"] = decide_probations(day, home)
    if failures:
        summary["outcome"] = f"failed: {', '.join(failures)}"
        publish_chain(summary)
        return Failed(
            message=f"{'; '.join(failures)} failed; the other stages completed", data=summary
        )
    summary["outcome"] = (
        f"marked {len(marking.marked)} account(s) through {day}; "
        f"{sum(map(len, summary['diagnostics'].values()))} new alert(s), {requested} "
        "asking for a repair; "
        f"{len(marking.halted)} halted; {len(summary['probations']['decided'])} "
        "probation(s) decided"
    )
    publish_chain(summary)
    return summary
