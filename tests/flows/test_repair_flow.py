"""The repair flow on a Prefect test server: unattended promotion, a person's decision through run
input, timeout."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from oomrl.portfolio.ledger import Ledger
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.agent.conftest import daily_momentum_autopsy, repair_home, sample_data  # noqa: F401
from tests.flows.prefect_helpers import account_events, artifact_keys, flow_run_messages, paused_run

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _promoted_events(account: str, sha: str, wait_s: float = 30.0) -> list[Any]:
    return account_events(
        "oomrl.strategy.promoted", account, wait_s, lambda e: e.payload["sha"] == sha
    )


def offline_answers(workspace: Path, autopsy: dict[str, Any]) -> list[str]:
    """What a model would answer, produced by the offline rules on a copy of the bundled
    workspace."""
    from guardrails.patch.diffs import apply_patch, parse_patch
    from oomrl.agent.providers import OfflineProvider
    from oomrl.agent.roles import CoderView, TestAuthorView, read_tree
    from tests.agent.repair_helpers import offline_mandate

    versions = StrategyVersions(workspace)
    versions.init()
    rules = OfflineProvider()
    mandate = offline_mandate(workspace, autopsy)
    tests = rules.test_author(
        TestAuthorView(
            mandate=mandate,
            source=read_tree(workspace, "strategies"),
            tests=read_tree(workspace, "tests"),
        )
    )
    assert apply_patch(parse_patch(tests.diff), workspace).ok
    code = rules.coder(
        CoderView(
            mandate=mandate,
            tests=read_tree(workspace, "tests"),
            source=read_tree(workspace, "strategies"),
        )
    )
    return [answer.model_dump_json() for answer in (mandate, tests, code)]


def test_auto_approved_repair_over_an_openai_endpoint_promotes_publishes_and_emits(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.repair import repair
    from tests.agent.fake_openai import Scripted, serve_fake_openai

    answers = offline_answers(tmp_path / "scratch-workspace", daily_momentum_autopsy)
    with serve_fake_openai() as server:
        server.queue(*[Scripted(content=text) for text in answers])
        monkeypatch.setenv("OOMRL_LLM_BASE_URL", server.url)  # an endpoint: the default is openai
        outcome = repair(daily_momentum_autopsy, auto_approve=True)
    assert outcome["status"] == "promoted", outcome["reason"]
    assert outcome["version"]["tag"] == "v2" and outcome["budget"]["calls"] == 3
    assert [r["messages"][0]["content"].splitlines()[0] for r in server.requests] == [
        "# Role: Critic",
        "# Role: Test Author (test genesis, source locked)",
        "# Role: Coder (logic genesis, tests locked)",
    ]
    settings = get_settings()
    versions = StrategyVersions(settings.store.workspace_dir, Ledger(settings.ledger_url))
    assert versions.ledger.active_version("paper") == outcome["version"]["sha"]
    assert versions.metadata("v2")["provider"] == "openai"
    assert {
        "repair-autopsy",
        "repair-test-gen-1",
        "repair-code-patch-1",
        "repair-cross-validation",
        "repair-cross-validation-decision",
        "repair-evidence",
        "repair-outcome",
    } <= artifact_keys("repair-")
    events = _promoted_events("paper", outcome["version"]["sha"])
    assert len(events) == 1 and events[0].payload["alert_id"] == daily_momentum_autopsy["alert_id"]


def _paused_run_id(wait_s: float = 60.0) -> Any:
    return paused_run("repair", wait_s).id


def _run_in_thread(
    autopsy: dict[str, Any], **params: Any
) -> tuple[threading.Thread, dict[str, Any]]:
    from flows.repair import repair

    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(repair(autopsy, **params)), daemon=True)
    thread.start()
    return thread, box


def test_a_person_rejects_the_mandate_in_the_ui(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    from orchestration.review import PAUSE_GRACE_S

    with flow_run_messages() as said:  # held until the run ends: it logs after it pauses
        thread, box = _run_in_thread(
            daily_momentum_autopsy, provider="offline", approval_timeout_s=120
        )
        run = paused_run("repair")
        details = run.state.state_details  # the server's deadline: PAUSE_GRACE_S beyond the run's
        assert details.pause_key == "mandate-review" and not details.pause_reschedule
        server_wait = (details.pause_timeout - run.state.timestamp).total_seconds()
        assert abs(server_wait - (120 + PAUSE_GRACE_S)) < 10, server_wait
        with get_client(sync_client=True) as client:  # tagged by the flow, however it was started
            assert (
                f"alert:{daily_momentum_autopsy['alert_id']}" in client.read_flow_run(run.id).tags
            )
        resume_flow_run(run.id, run_input={"decision": "reject", "reason": "too strict"})
        thread.join(60)
    assert box["status"] == "rejected" and box["step"] == "approval"
    assert box["reason"] == "too strict"
    assert "paused for the mandate review; no answer within 120 s ends it" in said
    settings = get_settings()
    versions = StrategyVersions(settings.store.workspace_dir, Ledger(settings.ledger_url))
    assert [v.tag for v in versions.list()] == ["v1"]


def test_a_resume_without_an_answer_rejects_and_says_so(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
) -> None:
    from prefect.flow_runs import resume_flow_run

    thread, box = _run_in_thread(daily_momentum_autopsy, provider="offline", approval_timeout_s=120)
    resume_flow_run(_paused_run_id())  # `prefect flow-run resume` without input: no decision at all
    thread.join(60)
    assert box["status"] == "rejected" and box["step"] == "approval"
    assert "resumed without an answer" in box["reason"] and "timeout" not in box["reason"]


def test_no_decision_before_the_timeout_rejects(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
) -> None:
    from flows.repair import outcome_of, repair
    from oomrl.repair.claims import ClaimBook

    state = repair(
        daily_momentum_autopsy, provider="offline", approval_timeout_s=2, return_state=True
    )
    assert state.is_completed() and state.name == "Rejected", state
    outcome = outcome_of(state)
    assert outcome["status"] == "rejected" and "timeout rejects" in outcome["reason"]
    assert "timeout rejects" in (state.message or "")
    with ClaimBook(get_settings().ledger_url).engine.connect() as conn:  # released at the end
        assert conn.exec_driver_sql("SELECT count(*) FROM repair_claims").scalar() == 0


def test_a_minimal_alert_is_completed_from_the_ledger_and_reaches_approval(
    repair_home: Path,  # noqa: F811
) -> None:
    from prefect.flow_runs import resume_flow_run

    from tests.agent.repair_helpers import mark_account

    # The docs' example: no autopsy, an account with marked sessions; the flow completes the alert
    # from its NAV history (the metrics of the last session) and asks a person.
    mark_account(get_settings().ledger_url, "paper", ["2024-08-29", "2024-08-30"])
    thread, box = _run_in_thread(
        {"alert_id": "ops-1", "account": "paper"}, provider="offline", approval_timeout_s=120
    )
    paused = _paused_run_id()
    resume_flow_run(paused, run_input={"decision": "reject", "reason": "only looking"})
    thread.join(60)
    assert box["status"] == "rejected" and box["reason"] == "only looking"
    assert box["mandate"]["module"] == "strategies.daily_momentum"


def test_steps_retry_only_when_the_endpoint_was_down() -> None:
    from prefect.states import Completed, Failed

    from oomrl.errors import LLMUnavailableError, OutOfMoneyError
    from tasks.repair import transient_only

    def retried(state: Any) -> bool:
        return transient_only(None, None, state)  # type: ignore[arg-type]

    assert retried(Failed(data=LLMUnavailableError("down", transient=True)))
    assert not retried(Failed(data=LLMUnavailableError("401 refused")))
    assert not retried(Failed(data=OutOfMoneyError("spent")))
    assert not retried(Completed(data=1))


def test_an_edit_in_the_ui_keeps_module_and_alert() -> None:
    from oomrl.agent.roles import Mandate
    from oomrl.diagnostics.mandate import Constraints
    from orchestration.review import MandateReview

    proposed = Mandate(
        module="strategies.daily_momentum",
        text="weekly",
        alert_id="a-9",
        constraints=Constraints(rebalance="weekly", max_adv_participation=0.05),
    )
    edit = MandateReview(
        decision="edit",
        text="monthly",
        rebalance="monthly",
        max_adv_participation=0.02,
        max_weekly_turnover=0.2,
        reason="slower",
    )
    decision = edit.to_decision(proposed)
    assert decision.action == "edit" and decision.mandate is not None
    assert decision.mandate.module == proposed.module and decision.mandate.alert_id == "a-9"
    assert decision.mandate.constraints.rebalance == "monthly"
    assert decision.mandate.constraints.max_weekly_turnover == 0.2
    assert MandateReview().to_decision(proposed).action == "approve"


def test_an_unknown_account_is_refused_like_at_every_door(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
) -> None:
    from flows.repair import repair
    from oomrl.repair.loop import RepairNotPromoted

    # Called directly, a Failed run raises its data
    with pytest.raises(RepairNotPromoted) as refused:
        repair({**daily_momentum_autopsy, "account": "ghost"}, auto_approve=True)
    outcome = refused.value.outcome.model_dump()
    assert outcome["status"] == "failed" and outcome["step"] == "autopsy"
    assert "unknown account 'ghost'" in outcome["reason"]
    assert not (repair_home / "runs").exists() and not (repair_home / "workspace").exists()


def test_a_repair_beyond_the_running_limit_does_not_start(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """However it was started (deployment, trigger, UI), a run beyond OOMRL_REPAIR_MAX_RUNNING live
    repairs (paused ones count: each holds its process) ends at once, naming the limit."""
    from flows.repair import outcome_of, repair
    from oomrl.repair.claims import ClaimBook

    monkeypatch.setenv("OOMRL_REPAIR_MAX_RUNNING", "2")
    book = ClaimBook(get_settings().ledger_url).create()
    for n in range(2):
        book.register(f"paused-{n}", f"account-{n}")  # two repairs waiting for approval, beating
    state = repair(daily_momentum_autopsy, auto_approve=True, provider="offline", return_state=True)
    assert state.is_failed() and state.name == "Too many repairs", state
    outcome = outcome_of(state)
    assert (
        outcome["step"] == "capacity"
        and "2 repairs are running already, the most "
        "OOMRL_REPAIR_MAX_RUNNING=2 allows (runs paused-0, paused-1)"
        in outcome["reason"]
    )
    assert not (repair_home / "runs").exists()  # nothing was started
    assert sorted(c.flow_run_id for c in book.live()) == ["paused-0", "paused-1"]


NO_IR = {
    "trigger": {
        "rule": "ir_decay",
        "value": -1.2,
        "threshold": -1.0,
        "window_start": "2026-02-24",
        "message": "rolling IR",
    }
}


@pytest.mark.parametrize(
    ("marks", "alert", "reason"),
    [
        (
            ["2026-02-27"],
            {"as_of": "2024-07-12"},  # the account, the alert
            "alert dated 2024-07-12 is before account 'paper''s first session (2026-02-27; "
            "marked 2026-02-27..2026-02-27)",
        ),
        (
            ["2024-07-01", "2024-07-02"],
            {"as_of": "2024-07-12"},
            "alert dated 2024-07-12 is after account 'paper''s last marked session "
            "(2024-07-02; marked 2024-07-01..2024-07-02)",
        ),
        (
            ["2026-02-27"],
            {**NO_IR, "as_of": "2026-02-27", "metrics": None},
            "alert dated 2026-02-27 (window from 2026-02-24) has no "
            "metrics.rolling_ir_60d, which rule 'ir_decay' reads",
        ),
        (
            [],
            {"alert_id": "bare-1", "account": "paper"},
            "undated alert carries no metrics and account 'paper' has no marked session to "
            "compute them from",
        ),
    ],
)
def test_an_alert_its_accounts_marked_sessions_cannot_explain_is_refused_like_at_every_door(
    repair_home: Path,  # noqa: F811
    daily_momentum_autopsy: dict[str, Any],  # noqa: F811
    marks: list[str],
    alert: dict[str, Any],
    reason: str,
) -> None:
    from flows.repair import repair
    from oomrl.repair.loop import RepairNotPromoted
    from tests.agent.repair_helpers import mark_account

    if marks:
        mark_account(get_settings().ledger_url, "paper", marks)
    body = dict(alert) if "alert_id" in alert else {**daily_momentum_autopsy, **alert}
    if "metrics" in alert:
        body["metrics"] = {**daily_momentum_autopsy["metrics"], "rolling_ir_60d": None}
    with pytest.raises(RepairNotPromoted) as refused:
        repair(body, auto_approve=True)
    outcome = refused.value.outcome.model_dump()
    assert outcome["status"] == "failed" and outcome["step"] == "autopsy"
    assert reason in outcome["reason"]
    assert not (repair_home / "runs").exists() and not (repair_home / "workspace").exists()
