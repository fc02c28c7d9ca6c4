"""The weekly rebalance flow: resolve the active strategy version, rebalance once, publish, alert on
halt."""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow
from prefect.states import Completed, State

from oomrl.build_info import flow_version
from oomrl.market import calendar
from oomrl.settings import settings_for
from tasks.chain import last_stored_session
from tasks.expected_ends import configure_flow_logging
from tasks.portfolio import (
    emit_halted,
    publish_rebalance_artifacts,
    rebalance_account,
    resolve_version,
    tag_run,
)

FLOW_VERSION = flow_version()  # the code's version; the strategy version is the run's tag
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs


# retries=0: a failed run is a final answer (halted account, bad data).
# The tasks retry what is transient.
@flow(name="weekly-rebalance", version=FLOW_VERSION, retries=0, log_prints=True)
def weekly_rebalance(
    account: str | None = None,
    as_of: date | None = None,
    dry_run: bool = False,
    home: str | None = None,
) -> dict[str, Any] | State:
    """Rebalance one paper account once on a session with its active strategy version.

    Args:
        account: The paper account to trade (empty: OOMRL_ACCOUNT, `paper` by default).
        as_of: The session to trade on, a date YYYY-MM-DD. Empty: the last session in the market
            store.
        dry_run: Compute the orders and fills without writing them to the ledger.
        home: Internal: OOMRL_HOME on the worker (folder). Leave empty to use the worker's setting.
    """
    name = account or settings_for(home).ledger.account
    day = as_of or last_stored_session(home)
    if not calendar.is_session(day):
        return Completed(
            name="NotASession",
            message=f"{day} is not an XSHG session: nothing traded, nothing failed",
        )
    strategy = resolve_version(name, home, dry_run)
    tag_run(strategy.name, strategy.label)
    outcome = rebalance_account(name, day, dry_run, home)
    publish_rebalance_artifacts(outcome, home, strategy.label)
    summary = outcome.summary()  # the deployment's result: JSON
    if outcome.halted and outcome.committed:
        emit_halted(summary)
        print(f"{name} HALTED by the kill switch on {day}")
    return summary  # the rebalance logged its own line of what it booked
