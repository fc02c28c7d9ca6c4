"""The attribution flow: the account's performance against the CSI 300, written as a report and published."""

from __future__ import annotations

from typing import Any

from prefect import flow

from oomrl.build_info import flow_version
from oomrl.config import get_settings
from tasks.attribution import build_account_report, publish_report_artifacts

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow


@flow(name="attribution", version=FLOW_VERSION, retries=1, retry_delay_seconds=30, log_prints=True)
def attribution(account: str | None = None, benchmark: str = "price", phases_file: str | None = None,
                rf: float = 0.0, home: str | None = None) -> dict[str, Any]:
    """Metrics, phases (strategy versions unless `phases_file`), style attribution, charts and tearsheet."""
    name = account or get_settings(**({"home": home} if home else {})).account
    summary = build_account_report(name, benchmark, phases_file, rf, home)
    publish_report_artifacts(summary)
    print(f"report of {name}: {summary['html']}")
    return summary
