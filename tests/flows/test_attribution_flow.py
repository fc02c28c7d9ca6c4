"""The attribution and loss-diagnostics flows on a real Prefect test server: artifacts and the loss
event."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.diagnostics.conftest import fills_frame, nav_frame, quiet_returns, seed_account_home

if TYPE_CHECKING:
    from oomrl.diagnostics.autopsy import Autopsy


def _artifacts(prefix: str) -> dict[str, object]:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return {a.key: a for a in client.read_artifacts() if a.key and a.key.startswith(prefix)}


def _loss_events(account: str, expected: int, wait_s: float = 30.0) -> list[object]:
    """Events reach the server asynchronously: poll until `expected` arrived or the wait ends."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=10)
    query = EventFilter(
        event=EventNameFilter(name=["oomrl.loss.alert"]),
        resource=EventResourceFilter(id=[f"oomrl.account.{account}"]),
    )
    deadline = time.monotonic() + wait_s
    with get_client(sync_client=True) as client:
        while True:
            events = client.read_events(filter=query, limit=50).events  # the server caps at 50
            if len(events) >= expected or time.monotonic() > deadline:
                return list(events)
            time.sleep(0.5)


@pytest.mark.usefixtures("prefect_harness")
def test_attribution_then_loss_diagnostics(tmp_path: Path) -> None:
    from flows.attribution import attribution
    from flows.diagnostics import loss_diagnostics
    from oomrl.diagnostics.repair_policy import JudgedAutopsy

    home = tmp_path / "home"
    seed_account_home(home, account="flowacct")

    summary = attribution(account="flowacct", home=str(home))
    assert Path(summary["html"]).exists() and summary["metrics"]["trading_days"] == 242
    assert {p["phase"] for p in summary["phases"]} == {"aaaa1111", "bbbb2222"}
    artifacts = _artifacts("attribution-")
    assert {
        "attribution-flowacct",
        "attribution-metrics-flowacct",
        "attribution-equity-flowacct",
    } <= set(artifacts)
    assert artifacts["attribution-flowacct"].type == "markdown"
    assert "Information ratio" in str(artifacts["attribution-metrics-flowacct"].data)
    # no HTTP route configured here: the images are embedded, and no broken file:// link is
    # published
    assert str(artifacts["attribution-equity-flowacct"].data).startswith("data:image/png;base64,")
    assert "file://" not in str(artifacts["attribution-flowacct"].data)

    judged = loss_diagnostics(account="flowacct", as_of="2025-06-30", home=str(home))
    # Models through the flows, read by attribute; JSON only in the event and the artifact
    assert all(isinstance(j, JudgedAutopsy) for j in judged)
    assert "daily_loss" in {j.autopsy.trigger.rule for j in judged}
    events = _loss_events("flowacct", len(judged))
    assert {e.payload["alert_id"] for e in events} == {j.autopsy.alert_id for j in judged}
    assert all(e.payload["account"] == "flowacct" for e in events)
    assert "loss-diagnostics-flowacct" in _artifacts("loss-diagnostics-")

    # Never twice
    assert loss_diagnostics(account="flowacct", as_of="2025-06-30", home=str(home)) == []


def test_flow_declarations() -> None:
    from flows.attribution import attribution
    from flows.diagnostics import loss_diagnostics
    from tasks.attribution import artifact_key, build_account_report, diagnose_and_alert
    from tasks.retry import unless_refused

    for declared in (attribution, loss_diagnostics):
        # A failure is final; the tasks retry transient ones
        assert declared.version and declared.retries == 0
    assert build_account_report.retries >= 1 and diagnose_and_alert.retries >= 1
    assert (
        build_account_report.retry_condition_fn
        is unless_refused
        is diagnose_and_alert.retry_condition_fn
    )
    assert artifact_key("Attribution", "Paper_01") == "attribution-paper-01"


def _autopsy() -> Autopsy:
    from oomrl.diagnostics.critic import autopsy_for
    from oomrl.diagnostics.rules import AlertConfig, evaluate

    nav = nav_frame(list(quiet_returns(30)) + [-0.05])
    fills = fills_frame(nav["date"].iloc[-2:])
    alert = evaluate(nav, fills, AlertConfig(), nav["date"].iloc[-1], "offline")[0]
    return autopsy_for(alert, nav, fills, AlertConfig(), module="strategies.daily_momentum")


def test_the_diagnosis_table_reads_judged_autopsies_by_attribute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """publish_diagnosis takes the models; the table's JSON rows are made at the artifact."""
    import tasks.attribution as tasks_attribution
    from oomrl.diagnostics.repair_policy import JudgedAutopsy, RepairDecision

    tables: list[list[dict[str, object]]] = []
    monkeypatch.setattr(
        tasks_attribution, "create_table_artifact", lambda rows, **_: tables.append(rows)
    )
    autopsy = _autopsy()
    judged = JudgedAutopsy(autopsy=autopsy, decision=RepairDecision("cooldown", "asked already"))
    tasks_attribution.publish_diagnosis.fn(autopsy.account, str(autopsy.as_of), [judged])
    ((row,),) = tables
    assert row == {
        "alert_id": autopsy.alert_id,
        "as_of": autopsy.as_of.isoformat(),
        "rule": autopsy.trigger.rule,
        "severity": autopsy.severity,
        "repair": "cooldown",
        "root_cause": autopsy.diagnostics.root_cause,
        "mandate": autopsy.mandate,
    }
    with pytest.raises(AttributeError):  # a dict is no longer what travels to the task
        tasks_attribution.publish_diagnosis.fn("a", "2026-01-05", [judged.model_dump(mode="json")])


def test_an_alert_that_cannot_be_emitted_is_an_error() -> None:
    """With events switched off (an API key but no API URL), emission fails loudly, so the alert
    stays new."""
    from prefect.settings import PREFECT_API_KEY, PREFECT_API_URL, temporary_settings

    from tasks.attribution import emit_loss_alert

    autopsy = _autopsy()
    with (
        temporary_settings({PREFECT_API_KEY: "pnu_test", PREFECT_API_URL: None}),
        pytest.raises(RuntimeError, match="loss alert was not emitted"),
    ):
        emit_loss_alert(autopsy)


@pytest.mark.usefixtures("prefect_harness")
def test_with_a_reports_url_the_artifacts_link_signed_http_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.attribution import attribution

    home = tmp_path / "home"
    seed_account_home(home, account="linked")
    monkeypatch.setenv("OOMRL_REPORTS_URL", "http://127.0.0.1:4299")
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "links-secret-0123456789abcdef")
    summary = attribution(account="linked", home=str(home))
    folder = Path(summary["html"]).parent.name
    artifacts = _artifacts("attribution-")
    prefix = f"http://127.0.0.1:4299/reports/{folder}/"
    assert str(artifacts["attribution-tearsheet-linked"].data).startswith(
        f"[Open the HTML tearsheet]({prefix}"
    )
    assert str(artifacts["attribution-equity-linked"].data).startswith(prefix + "equity.png?sig=")
    assert f"]({prefix}rolling_ir.png?sig=" in str(artifacts["attribution-linked"].data)
