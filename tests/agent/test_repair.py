"""Repair orchestration: gate rejections reach the agent as feedback; every failure leaves nothing half-done."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from guardrails.gate import run_gate
from oomrl.agent.budget import AgentSettings, Budget
from oomrl.agent.llm import LLMClient, OpenAIBackend, Transcript
from oomrl.agent.offline_code import unified_diff
from oomrl.agent.roles import (
    CoderView,
    Constraints,
    CriticView,
    LLMProvider,
    Mandate,
    Patch,
    TestAuthorView,
)
from oomrl.crossval import CrossValidation
from oomrl.portfolio.ledger import Ledger
from oomrl.repair import (
    AttemptRecord,
    Decision,
    RepairContext,
    RepairStepError,
    logic_genesis,
    prepare_candidate,
    run_repair,
)
from oomrl.versions import StrategyVersions
from tests.agent.fake_openai import FakeOpenAI, Scripted, serve_fake_openai

MANDATE = Mandate(module="strategies.daily_momentum", text="Trade weekly within ADV and turnover limits",
                  constraints=Constraints(rebalance="weekly", max_adv_participation=0.05,
                                          max_weekly_turnover=0.3), alert_id="alert-0001")
AUTOPSY = {"account": "paper", "alert_id": "alert-0001",
           "diagnostics": {"module": "strategies.daily_momentum"}}
SOURCE = "strategies/daily_momentum.py"
TESTS = "tests/strategies/test_daily_momentum.py"


class ScriptedProvider:
    """Answers from lists, recording every view it was shown (what the agent saw as feedback)."""

    name = "scripted"

    def __init__(self, test_author: list[Callable[[TestAuthorView], str]] | None = None,
                 coder: list[Callable[[CoderView], str]] | None = None) -> None:
        self.author_answers = list(test_author or [])
        self.coder_answers = list(coder or [])
        self.author_views: list[TestAuthorView] = []
        self.coder_views: list[CoderView] = []

    def critic(self, view: CriticView) -> Mandate:
        return MANDATE

    def test_author(self, view: TestAuthorView) -> Patch:
        self.author_views.append(view)
        return Patch(diff=self.author_answers.pop(0)(view), notes="scripted")

    def coder(self, view: CoderView) -> Patch:
        self.coder_views.append(view)
        return Patch(diff=self.coder_answers.pop(0)(view), notes="scripted")


def no_cross_validation(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
    raise AssertionError("cross-validation must not run after a failed genesis")


def make_context(tmp_path: Path, provider: Any, budget: Budget | None = None,
                 transcript: Transcript | None = None) -> RepairContext:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.create_schema()
    versions = StrategyVersions(tmp_path / "workspace", ledger)
    versions.init()
    versions.activate("v1", "paper", "daily_momentum")
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    agent = AgentSettings(attempts=2, retries=1, backoff_s=0.01, timeout_s=5.0)
    return RepairContext(versions=versions, provider=provider,
                         budget=budget or Budget.from_settings(agent),
                         transcript=transcript or Transcript(run_dir / "transcript.jsonl"),
                         run_dir=run_dir, account="paper", gate=run_gate,
                         cross_validator=no_cross_validation, agent=agent, lock="namespace")


def approve(mandate: Mandate) -> Decision:
    return Decision(action="approve")


def assert_untouched(ctx: RepairContext, head: str) -> None:
    """Nothing half-done: same head and tags, clean tree, same active version, no candidate left."""
    assert ctx.versions.head() == head
    assert [v.tag for v in ctx.versions.list()] == ["v1"]
    assert ctx.versions.git("status", "--porcelain") == ""
    assert ctx.versions.ledger.active_version("paper") == head  # type: ignore[union-attr]
    assert not ctx.candidate.exists()
    assert json.loads((ctx.run_dir / "outcome.json").read_text())["status"] == "failed"


def edit_source(view: TestAuthorView | CoderView) -> str:
    old = view.source[SOURCE]
    return unified_diff(SOURCE, old, old.replace("top_k: int = Field(10", "top_k: int = Field(5"))


def edit_tests(view: CoderView) -> str:
    old = view.tests[TESTS]
    return unified_diff(TESTS, old, old.replace("assert not STRATEGY", "assert STRATEGY", 1))


def test_test_author_editing_source_is_rejected_and_told_why(tmp_path: Path) -> None:
    provider = ScriptedProvider(test_author=[edit_source, edit_source])
    ctx = make_context(tmp_path, provider)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "test-genesis"
    assert "diff.locked_path" in outcome.reason
    assert provider.author_views[0].feedback == []
    gradient = provider.author_views[1].feedback[0]  # the gate's verdict, as JSON, on attempt 1
    assert gradient["attempt"] == 1 and gradient["accepted"] is False
    assert gradient["violations"][0]["rule"] == "diff.locked_path"
    assert gradient["violations"][0]["path"] == SOURCE
    assert (ctx.run_dir / "attempts" / "test-gen-1.verdict.json").exists()
    assert_untouched(ctx, head)


def test_coder_editing_tests_is_rejected_and_the_verdict_reaches_it(tmp_path: Path) -> None:
    provider = ScriptedProvider(coder=[edit_tests, lambda view: "--- a/x.py\n+++ b/x.py\n@@ garbage"])
    ctx = make_context(tmp_path, provider)
    prepare_candidate(ctx)
    red = AttemptRecord(phase="test-gen", attempt=1, diff="", verdict={"accepted": True, "phase": "test-gen"})
    with pytest.raises(RepairStepError, match="logic-genesis failed: .*diff.malformed"):
        logic_genesis(ctx, MANDATE, red)
    first, second = provider.coder_views
    assert first.last_verdict == red.verdict and first.feedback == []
    assert second.last_verdict is not None
    assert second.last_verdict["violations"][0]["rule"] == "diff.locked_path"
    assert second.last_verdict["violations"][0]["path"] == TESTS
    assert [r.verdict["violations"][0]["rule"] for r in ctx.attempts] == ["diff.locked_path",
                                                                          "diff.malformed"]
    assert ctx.attempts[1].verdict["judge"] == "pre-gate"  # unparseable: no gate run spent on it


def test_a_rejected_mandate_changes_nothing(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, ScriptedProvider())
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, lambda m: Decision(action="reject", reason="not now"))
    assert (outcome.status, outcome.step, outcome.reason) == ("rejected", "approval", "not now")
    assert ctx.versions.head() == head and not ctx.candidate.exists()


def test_a_mandate_for_an_unknown_module_fails_at_the_critic(tmp_path: Path) -> None:
    class Lost(ScriptedProvider):
        def critic(self, view: CriticView) -> Mandate:
            return MANDATE.model_copy(update={"module": "strategies.nowhere"})

    ctx = make_context(tmp_path, Lost())
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "critic"
    assert "strategies.nowhere" in outcome.reason


# -- the openai provider against a loopback server ---------------------------------------------------
@pytest.fixture()
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as state:
        yield state


def llm_context(tmp_path: Path, server: FakeOpenAI, budget: Budget | None = None) -> RepairContext:
    agent = AgentSettings(attempts=2, retries=1, backoff_s=0.01, timeout_s=0.5, max_answer_chars=4000)
    transcript = Transcript(tmp_path / "transcript.jsonl")
    budget = budget or Budget.from_settings(agent)
    client = LLMClient(OpenAIBackend(server.url, "key", "fake-model", agent.timeout_s), budget,
                       transcript, agent, sleep=lambda s: None)
    ctx = make_context(tmp_path, LLMProvider(client), budget, transcript)
    ctx.agent = agent
    return ctx


def answer(payload: dict[str, Any], **kw: Any) -> Scripted:
    return Scripted(content=json.dumps(payload), **kw)


def test_llm_repair_bad_answers_end_in_a_clean_failure(tmp_path: Path, server: FakeOpenAI) -> None:
    server.queue(
        Scripted(content="slow", delay_s=1.5),                      # critic: times out, retried
        answer(MANDATE.model_dump()),                               # critic: the mandate
        answer({"diff": "x" * 5000, "notes": "too long"}),          # test author: oversized
        answer({"diff": "this is not a diff", "notes": "oops"}))    # test author: malformed
    ctx = llm_context(tmp_path, server)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "test-genesis"
    assert "diff.malformed" in outcome.reason
    rules = [r.verdict["violations"][0]["rule"] for r in outcome.attempts]
    assert rules == ["answer.invalid", "diff.malformed"]
    # the first rejection went back to the model with the second request
    assert "answer.invalid" in server.requests[3]["messages"][-1]["content"]
    assert "Test Author" in server.requests[3]["messages"][0]["content"]  # its prompt file
    kinds = [r["kind"] for r in ctx.transcript.records()]
    assert kinds.count("error") == 1 and kinds.count("response") == 3
    assert outcome.transcript_digest == ctx.transcript.digest()
    assert_untouched(ctx, head)


def test_llm_repair_out_of_money_ends_cleanly(tmp_path: Path, server: FakeOpenAI) -> None:
    server.queue(answer(MANDATE.model_dump(), prompt_tokens=100, completion_tokens=50),
                 answer({"diff": "", "notes": ""}, prompt_tokens=300, completion_tokens=50))
    budget = Budget(max_tokens=400, max_cost_usd=1.0, price_prompt_per_mtok=1.0,
                    price_completion_per_mtok=1.0)
    ctx = llm_context(tmp_path, server, budget)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "failed" and outcome.step == "test-genesis"
    assert outcome.reason.startswith("out of money") and "tokens 500/400" in outcome.reason
    assert outcome.budget["tokens_spent"] == 500 and len(server.requests) == 2
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
    edited = MANDATE.model_copy(update={"text": "Monthly, please",
                                        "constraints": Constraints(rebalance="monthly")})
    outcome = run_repair(AUTOPSY, ctx, lambda m: Decision(action="edit", mandate=edited, reason="r"))
    assert outcome.mandate == edited and provider.author_views[0].mandate == edited
    assert json.loads((ctx.run_dir / "decision.json").read_text())["action"] == "edit"
    rejected = [r.verdict["violations"][0] for r in outcome.attempts]
    assert [v["rule"] for v in rejected] == ["diff.malformed", "diff.locked_path"]
    assert rejected[0]["message"] == "the patch is empty"


def test_a_failing_cross_validation_names_its_checks_and_is_kept(tmp_path: Path) -> None:
    from oomrl.crossval import Check
    from oomrl.repair import cross_validation, finish

    table = CrossValidation(start=date(2024, 7, 1), end=date(2024, 9, 30), rows=[], checks=[
        Check(name="max_weekly_turnover", passed=False, detail="busiest week traded 0.9")])
    ctx = make_context(tmp_path, ScriptedProvider())
    ctx.cross_validator = lambda c, m: table
    prepare_candidate(ctx)
    prepare_candidate(ctx)  # a retried step starts from a fresh clone
    with pytest.raises(RepairStepError, match="cross-validation failed: max_weekly_turnover: busiest"):
        cross_validation(ctx, MANDATE)
    outcome = finish(ctx, "failed", "cross-validation", "see table", MANDATE)
    assert outcome.cross_validation == table and not ctx.candidate.exists()


def test_load_autopsy_accepts_full_or_partial_and_names_problems(
        daily_momentum_autopsy: dict[str, Any]) -> None:
    from oomrl.errors import OomrlError
    from oomrl.repair import as_of_of, load_autopsy

    full = load_autopsy(daily_momentum_autopsy)
    assert full["alert_id"] == daily_momentum_autopsy["alert_id"]
    assert as_of_of(full) == date.fromisoformat(full["as_of"]) and as_of_of(AUTOPSY) is None
    alert = {"alert_id": "alert-0001", "account": "paper"}
    assert load_autopsy(alert) == alert  # a loss alert: the repair completes it from the ledger
    with pytest.raises(OomrlError, match="invalid loss alert .*diagnostics: Extra inputs"):
        load_autopsy(AUTOPSY)
    with pytest.raises(OomrlError, match="invalid autopsy: .*alert_id"):
        load_autopsy({"event": "FINANCIAL_DEGRADATION_DETECTED", "account": "paper"})
    with pytest.raises(OomrlError, match="must be a JSON object, got list"):
        load_autopsy([1])


def test_a_gate_that_cannot_judge_fails_the_step_cleanly(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, ScriptedProvider(test_author=[edit_source]))
    ctx.lock = "no-such-lock"
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.step == "test-genesis"
    assert outcome.reason.startswith("the gate could not judge: unknown lock backend 'no-such-lock'")
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
    from guardrails.diffs import apply_patch, parse_patch
    from oomrl.repair import changed_tests

    ctx = make_context(tmp_path, ScriptedProvider())
    prepare_candidate(ctx)
    old = (ctx.candidate / TESTS).read_text()
    first = next(n for n in ast.parse(old).body
                 if isinstance(n, ast.FunctionDef) and n.name.startswith("test_"))
    lines = old.splitlines(keepends=True)
    lines.insert(first.lineno, "    # the mandate changed this test\n")
    new_file = "def test_new_one():\n    assert 1 < 2\n\n\ndef helper():\n    return 1\n"
    diff = (unified_diff(TESTS, old, "".join(lines))
            + unified_diff("tests/strategies/test_extra.py", None, new_file))
    assert apply_patch(parse_patch(diff), ctx.candidate).ok
    assert changed_tests(ctx.candidate, diff) == [f"{TESTS}::{first.name}",
                                                  "tests/strategies/test_extra.py::test_new_one"]
    assert changed_tests(ctx.candidate, "") == []


def test_a_retried_step_continues_the_count_and_keeps_the_feedback(tmp_path: Path) -> None:
    from oomrl.repair import test_genesis as run_test_genesis

    provider = ScriptedProvider(test_author=[edit_source] * 4)
    ctx = make_context(tmp_path, provider)
    prepare_candidate(ctx)
    for _ in range(2):  # as a Prefect task retry would run the step again
        with pytest.raises(RepairStepError, match="no accepted patch in 2 attempt"):
            run_test_genesis(ctx, MANDATE)
    assert [r.attempt for r in ctx.attempts] == [1, 2, 3, 4]
    assert len(provider.author_views[3].feedback) == 3
    assert sorted(p.name for p in (ctx.run_dir / "attempts").glob("*.diff")) == [
        f"test-gen-{n}.diff" for n in range(1, 5)]


def test_a_tautological_test_and_a_test_sniffing_coder_are_caught_and_reported(tmp_path: Path) -> None:
    tautology = "def test_always():\n    assert True\n"
    sniffing = ("import os\n\n\ndef in_tests() -> bool:\n"
                "    return 'PYTEST_CURRENT_TEST' in os.environ\n")
    provider = ScriptedProvider(
        test_author=[lambda view: unified_diff("tests/strategies/test_always.py", None, tautology)] * 2,
        coder=[lambda view: unified_diff("strategies/sniff.py", None, sniffing)] * 2)
    ctx = make_context(tmp_path, provider)
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.step == "test-genesis"
    told = provider.author_views[1].feedback[0]["violations"]
    assert told and all(v["path"] == "tests/strategies/test_always.py" for v in told)
    red = AttemptRecord(phase="test-gen", attempt=1, diff="", verdict={"accepted": True})
    prepare_candidate(ctx)
    with pytest.raises(RepairStepError, match="logic-genesis"):
        logic_genesis(ctx, MANDATE, red)
    sniffed = provider.coder_views[1].last_verdict
    assert sniffed is not None and sniffed["violations"][0]["path"] == "strategies/sniff.py"
    # the gate's capability allow-list refuses `os`, the way into the environment
    assert "sanitizer.import_not_allowed" in json.dumps(sniffed["violations"])
