"""Repair orchestration: gate rejections reach the agent as feedback; every failure leaves nothing
half-done."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import FrozenInstanceError, replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from guardrails.verdict import LockInfo, Verdict
from oomrl.agent.budget import Budget
from oomrl.agent.llm import LLMClient, OpenAIBackend, Transcript
from oomrl.agent.offline_common import unified_diff
from oomrl.agent.roles import CriticView, LLMProvider, Mandate, TestAuthorView
from oomrl.agent.verdicts import PreGateVerdict, RepeatVerdict
from oomrl.diagnostics.mandate import Constraints
from oomrl.repair.crossval import CrossValidation
from oomrl.repair.loop import (
    AttemptRecord,
    Decision,
    RepairContext,
    RepairStepError,
    logic_genesis,
    prepare_candidate,
    run_repair,
)
from tests.agent.fake_openai import FakeOpenAI, Scripted, serve_fake_openai
from tests.agent.repair_helpers import (
    AUTOPSY,
    MANDATE,
    SOURCE,
    TESTS,
    ScriptedProvider,
    agent_settings,
    approve,
    assert_untouched,
    at_step,
    edges,
    edit_source,
    edit_tests,
    make_context,
)

RED_ACCEPTED = Verdict(accepted=True, phase="test-gen", locks=LockInfo(backend="test"))


def test_test_author_editing_source_is_rejected_and_told_why(tmp_path: Path) -> None:
    provider = ScriptedProvider(test_author=[edit_source, edit_source])
    ctx = make_context(tmp_path, provider)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "test-genesis"
    assert "diff.locked_path" in outcome.reason
    assert provider.author_views[0].feedback == []
    gradient = provider.author_views[1].feedback[0]  # the gate's verdict, encoded, on attempt 1
    assert gradient["attempt"] == 1 and gradient["accepted"] is False
    assert gradient["violations"][0]["rule"] == "diff.locked_path"
    assert gradient["violations"][0]["file"] == SOURCE
    assert gradient["summary"].startswith("rejected: 1 violation(s) of diff.locked_path")
    assert (ctx.run_dir / "attempts" / "test-gen-1.verdict.json").exists()
    assert edges(outcome) == [
        ("critic", "approval"),
        ("approval", "test-genesis"),
        ("test-genesis", "test-genesis"),
        ("test-genesis", "failed"),
    ]
    assert len((ctx.run_dir / "trail.jsonl").read_text().splitlines()) == 4
    assert_untouched(ctx, head)


def test_coder_editing_tests_is_rejected_and_the_verdict_reaches_it(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        coder=[edit_tests, lambda view: "--- a/x.py\n+++ b/x.py\n@@ garbage"]
    )
    ctx = at_step(make_context(tmp_path, provider), "logic-genesis")
    prepare_candidate(ctx)
    red = AttemptRecord(phase="test-gen", attempt=1, diff="", verdict=RED_ACCEPTED)
    with pytest.raises(RepairStepError, match="logic-genesis failed: .*diff.malformed"):
        logic_genesis(ctx, MANDATE, red)
    first, second = provider.coder_views
    assert first.last_verdict == red.verdict.model_dump(mode="json") and first.feedback == []
    assert second.last_verdict is not None
    assert second.last_verdict["violations"][0]["rule"] == "diff.locked_path"
    assert second.last_verdict["violations"][0]["file"] == TESTS
    assert [r.verdict.violations[0].rule for r in ctx.state.attempts] == [
        "diff.locked_path",
        "diff.malformed",
    ]
    # Unparseable: no gate run spent on it
    assert isinstance(ctx.state.attempts[1].verdict, PreGateVerdict)
    assert (
        json.loads((ctx.run_dir / "attempts" / "code-patch-2.verdict.json").read_text())["judge"]
        == "pre-gate"
    )


def test_what_a_repair_is_given_is_fixed_and_only_its_state_changes(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, ScriptedProvider())
    with pytest.raises(FrozenInstanceError):
        ctx.account = "other"  # type: ignore[misc]
    other = replace(ctx, lock="hash-only")
    other.state.round = 2  # another setup of the same repair shares its running state
    assert (ctx.lock, ctx.state.round) == ("namespace", 2)


def test_a_rejected_mandate_changes_nothing(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, ScriptedProvider())
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, lambda m: Decision(action="reject", reason="not now"))
    assert (outcome.status, outcome.step, outcome.reason) == ("rejected", "approval", "not now")
    assert edges(outcome) == [("critic", "approval"), ("approval", "rejected")]
    assert ctx.versions.head() == head and not ctx.candidate.exists()


def test_a_mandate_for_an_unknown_module_fails_at_the_critic(tmp_path: Path) -> None:
    class Lost(ScriptedProvider):
        def critic(self, view: CriticView) -> Mandate:
            return MANDATE.model_copy(update={"module": "strategies.nowhere"})

    ctx = make_context(tmp_path, Lost())
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "critic"
    assert "strategies.nowhere" in outcome.reason
    assert edges(outcome) == [("critic", "failed")]


# -- the openai provider against a loopback server -------------------------------------------------
@pytest.fixture()
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as state:
        yield state


def llm_context(tmp_path: Path, server: FakeOpenAI, budget: Budget | None = None) -> RepairContext:
    # Long enough for every prompt reply on a loaded machine; a late reply is held back (`hang`),
    # not timed.
    agent = agent_settings(
        max_attempts=2, retries=1, backoff_s=0.01, timeout_s=3.0, max_answer_chars=4000
    )
    transcript = Transcript(tmp_path / "transcript.jsonl")
    budget = budget or Budget.from_settings(agent)
    client = LLMClient(
        OpenAIBackend(server.url, "key", "fake-model", agent.timeout_s, agent.request_deadline_s),
        budget,
        transcript,
        agent,
        sleep=lambda s: None,
    )
    ctx = make_context(tmp_path, LLMProvider(client), budget, transcript)
    ctx = replace(ctx, agent=agent)
    return ctx


def answer(payload: dict[str, Any], **kw: Any) -> Scripted:
    return Scripted(content=json.dumps(payload), **kw)


@pytest.mark.slow
def test_llm_repair_bad_answers_end_in_a_clean_failure(tmp_path: Path, server: FakeOpenAI) -> None:
    # Test author: malformed
    server.queue(
        Scripted(content="slow", hang=True),  # critic: times out, retried
        answer(MANDATE.model_dump()),  # critic: the mandate
        answer({"diff": "x" * 5000, "notes": "too long"}),  # test author: oversized
        answer({"diff": "this is not a diff", "notes": "oops"}),
    )
    ctx = llm_context(tmp_path, server)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "test-genesis"
    assert "diff.malformed" in outcome.reason
    rules = [r.verdict.violations[0].rule for r in outcome.attempts]
    assert rules == ["answer.invalid", "diff.malformed"]
    # the first rejection went back to the model with the second request
    assert "answer.invalid" in server.requests[3]["messages"][-1]["content"]
    assert "Test Author" in server.requests[3]["messages"][0]["content"]  # its prompt file
    kinds = [r["kind"] for r in ctx.transcript.records()]
    assert kinds.count("error") == 1 and kinds.count("response") == 3
    assert outcome.transcript_digest == ctx.transcript.digest()
    assert_untouched(ctx, head)


def test_llm_repair_that_cannot_afford_its_next_step_stops_before_asking(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    server.queue(
        answer(MANDATE.model_dump(), prompt_tokens=7_000, completion_tokens=50),
        answer({"diff": "", "notes": ""}),
    )
    # Enough for the Critic's prompt (its view holds S and T), not for a second one as long: the
    # Test Author's view of S and T.
    budget = Budget(
        max_tokens=9_000, max_cost_usd=1.0, price_prompt_per_mtok=1.0, price_completion_per_mtok=1.0
    )
    ctx = llm_context(tmp_path, server, budget)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "test-genesis"
    assert outcome.reason.startswith("out of money: cannot afford the next step (test_author")
    assert "tokens 7050/9000" in outcome.reason
    assert outcome.budget["tokens_spent"] == 7050 and len(server.requests) == 1  # never sent
    assert_untouched(ctx, head)


def test_llm_repair_endpoint_down_fails_at_the_critic(tmp_path: Path, server: FakeOpenAI) -> None:
    server.queue(Scripted(status=500, content="boom"), Scripted(status=502, content="boom"))
    ctx = llm_context(tmp_path, server)
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "critic"
    assert "LLMUnavailableError" in outcome.reason and "failed 2 times" in outcome.reason
    assert ctx.versions.head() == ctx.versions.resolve("v1")


def test_an_edited_mandate_is_what_the_test_author_gets(tmp_path: Path) -> None:
    provider = ScriptedProvider(test_author=[lambda view: "", edit_source])
    ctx = make_context(tmp_path, provider)
    edited = MANDATE.model_copy(
        update={"text": "Monthly, please", "constraints": Constraints(rebalance="monthly")}
    )
    outcome = run_repair(
        AUTOPSY, ctx, lambda m: Decision(action="edit", mandate=edited, reason="r")
    )
    assert outcome.mandate == edited and provider.author_views[0].mandate == edited
    assert json.loads((ctx.run_dir / "decision.json").read_text())["action"] == "edit"
    rejected = [r.verdict.violations[0] for r in outcome.attempts]
    assert [v.rule for v in rejected] == ["diff.malformed", "diff.locked_path"]
    assert rejected[0].message == "the patch is empty"


def test_a_cross_validation_table_is_kept_per_round_and_in_the_outcome(tmp_path: Path) -> None:
    from oomrl.repair.crossval import Check
    from oomrl.repair.loop import cross_validation, finish

    table = CrossValidation(
        start=date(2024, 7, 1),
        end=date(2024, 9, 30),
        rows=[],
        checks=[Check(name="max_weekly_turnover", passed=False, detail="busiest week traded 0.9")],
    )
    ctx = at_step(make_context(tmp_path, ScriptedProvider()), "cross-validation")
    ctx = replace(ctx, cross_validator=lambda c, m: table)
    prepare_candidate(ctx)
    prepare_candidate(ctx)  # a retried step starts from a fresh clone
    assert cross_validation(ctx, MANDATE) == table
    assert (ctx.run_dir / "cross_validation-1.json").exists()
    outcome = finish(ctx, "failed", "cross-validation", "see table", MANDATE)
    assert outcome.cross_validation == table and not ctx.candidate.exists()
    assert outcome.trail[-1]["target"] == "failed"


def test_load_autopsy_accepts_full_or_partial_and_names_problems(
    daily_momentum_autopsy: dict[str, Any],
) -> None:
    from oomrl.diagnostics.autopsy import Autopsy, LossAlert, input_json
    from oomrl.errors import OomrlError
    from oomrl.repair.loop import as_of_of, load_autopsy

    full = load_autopsy(daily_momentum_autopsy)
    assert isinstance(full, Autopsy) and full.alert_id == daily_momentum_autopsy["alert_id"]
    # The JSON it came as, byte for byte once dumped
    assert input_json(full) == daily_momentum_autopsy
    assert (
        as_of_of(full) == date.fromisoformat(daily_momentum_autopsy["as_of"])
        and as_of_of(AUTOPSY) is None
    )
    alert = {"alert_id": "alert-0001", "account": "paper"}
    loaded = load_autopsy(alert)  # a loss alert: the repair completes it from the ledger
    assert type(loaded) is LossAlert and input_json(loaded) == alert
    with pytest.raises(OomrlError, match="invalid loss alert .*diagnostics: Extra inputs"):
        # A pending alert is what the repair makes, never an input
        load_autopsy(input_json(AUTOPSY))
    with pytest.raises(OomrlError, match="invalid autopsy: .*alert_id"):
        load_autopsy({"event": "FINANCIAL_DEGRADATION_DETECTED", "account": "paper"})
    with pytest.raises(OomrlError, match="must be a JSON object, got list"):
        load_autopsy([1])


def test_a_gate_that_cannot_judge_fails_the_step_cleanly(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, ScriptedProvider(test_author=[edit_source]))
    ctx = replace(ctx, lock="no-such-lock")
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.step == "test-genesis"
    assert outcome.reason.startswith(
        "the gate could not judge: unknown lock backend 'no-such-lock'"
    )
    assert_untouched(ctx, head)


def test_a_defect_still_reports_the_step_and_keeps_the_traceback(tmp_path: Path) -> None:
    class Broken(ScriptedProvider):
        def critic(self, view: CriticView) -> Mandate:
            raise RuntimeError("bug in a provider")

    ctx = make_context(tmp_path, Broken())
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "critic")
    assert outcome.reason.startswith("unexpected RuntimeError: bug in a provider")
    assert "Traceback" in (ctx.run_dir / "error.txt").read_text()


def test_the_coder_is_told_which_tests_the_accepted_diff_added_or_changed(tmp_path: Path) -> None:
    from guardrails.patch.diffs import apply_patch, parse_patch
    from oomrl.repair.loop import changed_tests

    ctx = make_context(tmp_path, ScriptedProvider())
    prepare_candidate(ctx)
    old = (ctx.candidate / TESTS).read_text()
    first = next(
        n
        for n in ast.parse(old).body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
    )
    lines = old.splitlines(keepends=True)
    lines.insert(first.lineno, "    # the mandate changed this test\n")
    new_file = "def test_new_one():\n    assert 1 < 2\n\n\ndef helper():\n    return 1\n"
    diff = unified_diff(TESTS, old, "".join(lines)) + unified_diff(
        "tests/strategies/test_extra.py", None, new_file
    )
    assert apply_patch(parse_patch(diff), ctx.candidate).ok
    assert changed_tests(ctx.candidate, diff) == [
        f"{TESTS}::{first.name}",
        "tests/strategies/test_extra.py::test_new_one",
    ]
    assert changed_tests(ctx.candidate, "") == []


def test_a_retried_step_continues_the_count_and_keeps_the_feedback(tmp_path: Path) -> None:
    from oomrl.errors import LLMUnavailableError
    from oomrl.repair.loop import test_genesis as run_test_genesis

    def endpoint_down(view: TestAuthorView) -> str:
        raise LLMUnavailableError("down", transient=True)

    provider = ScriptedProvider(test_author=[edit_source, endpoint_down, lambda v: "", edit_source])
    ctx = at_step(make_context(tmp_path, provider), "test-genesis")
    ctx = replace(ctx, agent=agent_settings(max_attempts=3))
    prepare_candidate(ctx)
    # As a Prefect task retry would then run the step again
    with pytest.raises(LLMUnavailableError):
        run_test_genesis(ctx, MANDATE)
    with pytest.raises(RepairStepError, match="ceiling of 3 role answers"):
        run_test_genesis(ctx, MANDATE)
    assert [r.attempt for r in ctx.state.attempts] == [1, 2, 3]
    assert [len(v.feedback) for v in provider.author_views] == [0, 1, 1, 2]
    assert provider.author_views[2].feedback[0]["violations"][0]["rule"] == "diff.locked_path"
    assert sorted(p.name for p in (ctx.run_dir / "attempts").glob("*.diff")) == [
        f"test-gen-{n}.diff" for n in range(1, 4)
    ]


@pytest.mark.slow
def test_a_tautological_test_and_a_test_sniffing_coder_are_caught_and_reported(
    tmp_path: Path,
) -> None:
    tautology = "def test_always():\n    assert True\n"
    sniffing = (
        "import os\n\n\ndef in_tests() -> bool:\n    return 'PYTEST_CURRENT_TEST' in os.environ\n"
    )
    provider = ScriptedProvider(
        test_author=[lambda view: unified_diff("tests/strategies/test_always.py", None, tautology)]
        * 2,
        coder=[lambda view: unified_diff("strategies/sniff.py", None, sniffing)] * 2,
    )
    ctx = make_context(tmp_path, provider)
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.step == "test-genesis"
    told = provider.author_views[1].feedback[0]["violations"]
    assert told and all(v["file"] == "tests/strategies/test_always.py" for v in told)
    repeated = outcome.attempts[1].verdict
    assert isinstance(repeated, RepeatVerdict)  # the same answer is not judged twice
    assert repeated.violations[0].rule == "answer.repeated"
    # And says so on disk
    assert outcome.model_dump(mode="json")["attempts"][1]["verdict"]["judge"] == "repeat"
    red = AttemptRecord(phase="test-gen", attempt=1, diff="", verdict=RED_ACCEPTED)
    (tmp_path / "again").mkdir()
    ctx = at_step(make_context(tmp_path / "again", provider), "logic-genesis")
    prepare_candidate(ctx)
    with pytest.raises(RepairStepError, match="logic-genesis"):
        logic_genesis(ctx, MANDATE, red)
    sniffed = provider.coder_views[1].last_verdict
    assert sniffed is not None and sniffed["violations"][0]["file"] == "strategies/sniff.py"
    # the gate's capability allow-list refuses `os`, the way into the environment
    assert "sanitizer.import_not_allowed" in json.dumps(sniffed["violations"])


def test_a_missing_held_out_folder_is_refused_before_the_repair_starts(repair_home: Path) -> None:
    from oomrl.errors import OomrlError
    from oomrl.repair.loop import open_context
    from oomrl.settings import get_settings

    with pytest.raises(OomrlError, match="OOMRL_AGENT_HOLDOUT_DIR .*nowhere is not a folder"):
        open_context(
            get_settings(), AUTOPSY, agent=agent_settings(holdout_dir=repair_home / "nowhere")
        )
    assert not (repair_home / "runs").exists()
