"""The attribution flow: the account's performance against the CSI 300, written as a report and
published."""

from __future__ import annotations

from typing import Any, Literal

from prefect import flow
from prefect.states import Completed, State

from oomrl.build_info import flow_version
from oomrl.settings import settings_for
from tasks.attribution import build_account_report, publish_report_artifacts, report_gap
from tasks.expected_ends import configure_flow_logging

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs
NOT_ENOUGH_SESSIONS = "NotEnoughSessions"


# retries=0: a failed report is a final answer (bad input); the tasks retry what is transient.
@flow(name="attribution", version=FLOW_VERSION, retries=0, log_prints=True)
def attribution(
    account: str | None = None,
    benchmark: Literal["price", "total_return"] = "price",
    phases_file: str | None = None,
    rf: float = 0.0,
    home: str | None = None,
) -> dict[str, Any] | State:
    """Metrics, phases (strategy versions unless `phases_file`), style attribution, charts and
    tearsheet.

    Args:
        account: The paper account to report on (empty: OOMRL_ACCOUNT, `paper` by default).
        benchmark: The CSI 300 series to compare with: `price` (000300) or `total_return` (H00300,
            dividends reinvested).
        phases_file: Optional phases file on the worker (CSV `name,start,end`, or YAML/JSON); empty:
            one phase per strategy version.
        rf: Risk-free rate for Sharpe and alpha, a fraction per year (0.02 = 2 %).
        home: Internal: OOMRL_HOME on the worker (folder). Leave empty to use the worker's setting.
    """
    name = account or settings_for(home).ledger.account
    gap = report_gap(name, home)
    if gap is not None:  # too early for a report is not a failure
        print(f"no report of {name} yet: {gap}")
        return Completed(
            name=NOT_ENOUGH_SESSIONS,
            message=f"no report of {name} yet: {gap}",
            data={"account": name, "skipped": gap},
        )
    summary = build_account_report(name, benchmark, phases_file, rf, home)
    publish_report_artifacts(summary)
    print(f"report of {name}: {summary['html']}")
    return summary
