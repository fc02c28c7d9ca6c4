"""Prefect tasks of attribution and loss diagnostics: report, artifacts, diagnosis, event."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event

from oomrl.artifacts import report_artifacts
from oomrl.diagnostics import repair_policy
from oomrl.diagnostics.autopsy import Autopsy
from oomrl.diagnostics.diagnose import diagnose_account
from oomrl.diagnostics.repair_policy import JudgedAutopsy, RepairDecision, alert_resource
from oomrl.events import LOSS_ALERT_EVENT, event_id
from oomrl.metrics.attribution import account_report, report_dir
from oomrl.metrics.performance import read_phases
from oomrl.report_links import ReportLinks
from oomrl.settings import settings_for
from tasks.retry import unless_refused

REPORT_RETRIES = 2


def artifact_key(*parts: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


@task(
    name="build-account-report",
    retries=REPORT_RETRIES,
    retry_delay_seconds=10,
    retry_condition_fn=unless_refused,
    cache_policy=NO_CACHE,
)
def build_account_report(
    account: str,
    benchmark: str = "price",
    phases_file: str | None = None,
    rf: float = 0.0,
    home: str | None = None,
) -> dict[str, Any]:
    """Write the account's report under OOMRL_HOME/runs; return its paths, metrics and phase
    rows."""
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.ledger import Ledger
    from oomrl.repair.versions import StrategyVersions

    settings = settings_for(home)
    phases = read_phases(Path(phases_file)) if phases_file else None
    report = account_report(
        Ledger(settings.ledger_url),
        ensure_sample(settings),
        account,
        report_dir(settings.store.runs_dir, account),
        phases=phases,
        benchmark_kind=benchmark,
        rf=rf,
        workspace=StrategyVersions(settings.store.workspace_dir),
        runs_dir=settings.store.runs_dir,
    )
    return {
        "account": account,
        "benchmark": benchmark,
        "html": str(report.html),
        "markdown": str(report.markdown),
        "pngs": [str(p) for p in report.pngs],
        "metrics": report.metrics,
        "phases": [] if report.phases is None else report.phases.to_dict("records"),
        "artifacts": asdict(report_artifacts(report, ReportLinks.from_env())),
    }


@task(name="publish-report-artifacts", cache_policy=NO_CACHE)
def publish_report_artifacts(summary: dict[str, Any]) -> None:
    """The report as artifacts the Prefect UI displays.

    They are the summary with its charts and the metrics table. They add the tearsheet link (over
    HTTP) and the equity chart.
    """
    account, shown = summary["account"], summary["artifacts"]
    create_markdown_artifact(
        markdown=shown["markdown"],
        key=artifact_key("attribution", account),
        description=f"Report of {account}",
    )
    create_table_artifact(
        shown["metrics_rows"],
        key=artifact_key("attribution-metrics", account),
        description=f"Metrics of {account} vs CSI 300 ({summary['benchmark']} index)",
    )
    if shown["tearsheet_url"]:
        create_link_artifact(
            shown["tearsheet_url"],
            link_text="Open the HTML tearsheet",
            key=artifact_key("attribution-tearsheet", account),
            description=f"The full tearsheet of {account}, served read-only by the webhook",
        )
    create_image_artifact(
        shown["image_url"],
        key=artifact_key("attribution-equity", account),
        description=shown["image_description"],
    )


def emit_loss_alert(autopsy: Autopsy, decision: RepairDecision | None = None) -> None:
    """Emit `oomrl.loss.alert` for the account with the autopsy as payload.

    The event id is the alert's. So a repeated emission of one alert is recognisably the same event.
    The resource's labels carry the severity and the repair policy's verdict. The repair trigger
    matches on them.
    """
    verdict = decision.verdict if decision else "requested"
    event = emit_event(
        event=LOSS_ALERT_EVENT,
        resource=alert_resource(autopsy.account, autopsy.severity, verdict),
        related=[
            {
                "prefect.resource.id": f"oomrl.alert.{autopsy.alert_id}",
                "prefect.resource.role": "alert",
            }
        ],
        payload=autopsy.model_dump(mode="json"),
        id=event_id(autopsy.alert_id),
    )
    if event is None:
        raise RuntimeError("Prefect events are not available: the loss alert was not emitted")


@task(
    name="diagnose-account",
    retries=REPORT_RETRIES,
    retry_delay_seconds=10,
    retry_condition_fn=unless_refused,
    cache_policy=NO_CACHE,
)
def diagnose_and_alert(
    account: str,
    as_of: str,
    config_file: str | None = None,
    home: str | None = None,
    start: str | None = None,
) -> list[JudgedAutopsy]:
    """Run the rules on every NAV session from `start` to `as_of`.

    The repair policy judges each new alert. The alert is emitted as an event, then stored (see
    diagnose()). Each autopsy comes back as a model with the policy's verdict.
    """
    from oomrl.portfolio.ledger import Ledger

    settings = settings_for(home)
    ledger = Ledger(settings.ledger_url)
    verdicts: dict[str, RepairDecision] = {}

    def judge_and_emit(autopsy: Autopsy) -> None:
        decision = verdicts[autopsy.alert_id] = repair_policy.judge(
            ledger, autopsy, settings.agent.repair_cooldown_sessions
        )
        emit_loss_alert(autopsy, decision)
        if decision.requested:
            repair_policy.record(ledger, autopsy)

    autopsies = diagnose_account(
        settings,
        account,
        as_of,
        Path(config_file) if config_file else None,
        publish=judge_and_emit,
        start=start,
    )
    return [JudgedAutopsy(autopsy=a, decision=verdicts[a.alert_id]) for a in autopsies]


@task(
    name="report-gap",
    cache_policy=NO_CACHE,
    retries=REPORT_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def report_gap(account: str, home: str | None = None) -> str | None:
    """Why the account's report cannot be written yet (too few NAV sessions), or None."""
    from oomrl.portfolio.service import open_ledger
    from oomrl.repair.chain import report_gap as gap

    return gap(len(open_ledger(settings_for(home)).nav_frame(account)))


@task(name="publish-diagnosis", cache_policy=NO_CACHE)
def publish_diagnosis(account: str, as_of: str, judged: list[JudgedAutopsy]) -> None:
    """A table of the new alerts (or a note that there are none); the rows are made here, at the
    artifact."""
    rows = [
        {
            **j.summary(),
            "root_cause": j.autopsy.diagnostics.root_cause,
            "mandate": j.autopsy.mandate,
        }
        for j in judged
    ]
    create_table_artifact(
        rows
        or [
            {
                "alert_id": "",
                "as_of": as_of,
                "rule": "no new alert",
                "severity": "",
                "repair": "",
                "root_cause": "",
                "mandate": "",
            }
        ],
        key=artifact_key("loss-diagnostics", account),
        description=f"Loss diagnostics of {account} on {as_of}: {len(rows)} new alert(s)",
    )
