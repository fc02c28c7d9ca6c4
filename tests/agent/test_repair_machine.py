"""The repair's state machine: the transitions docs/agent.md draws, each taken here with the real
gate."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy as sa

from oomrl.agent.machine import TRANSITIONS, Trail
from oomrl.agent.providers import OfflineProvider
from oomrl.agent.roles import CoderView, Mandate, TestAuthorView
from oomrl.errors import IllegalTransitionError
from oomrl.repair.crossval import CrossValidation
from oomrl.repair.loop import Decision, RepairContext, run_repair
from tests.agent.doc_edges import (
    doc_text,
    drawn_edges,
    edge_table,
    edges_of_test,
    takes_documented_edges,
)
from tests.agent.repair_helpers import (
    AUTOPSY,
    ScriptedProvider,
    agent_settings,
    approve,
    assert_untouched,
    edges,
    edit_tests,
    make_context,
    replays,
    strings,
)

HAPPY = [
    ("critic", "approval"),
    ("approval", "test-genesis"),
    ("test-genesis", "logic-genesis"),
    ("logic-genesis", "cross-validation"),
]


def offline_context(tmp_path: Path, *failing: str, **agent: int) -> RepairContext:
    ctx = make_context(tmp_path, OfflineProvider())
    ctx = replace(ctx, agent=agent_settings(**agent))
    ctx = replace(ctx, cross_validator=replays(*failing))
    return ctx


def new_lines(diff: str, workspace: Path) -> list[str]:
    """The substantial lines a diff adds that the workspace did not already hold anywhere."""
    before = "\n".join(p.read_text(encoding="utf-8") for p in workspace.rglob("*.py"))
    return [
        line[1:].strip()
        for line in diff.splitlines()
        if line.startswith("+")
        and not line.startswith("+++")
        and len(line.strip()) > 30
        and line[1:].strip() not in before
    ]


def test_the_machine_refuses_a_transition_it_does_not_have() -> None:
    trail = Trail()
    with pytest.raises(IllegalTransitionError, match="cannot go from critic to promotion"):
        trail.move("promotion", "skipping the tests")
    assert trail.state == "critic" and trail.moves == []


def test_docs_draw_every_transition_and_name_a_test_that_takes_it() -> None:
    """The Mermaid diagram and the table of docs/agent.md are the machine's TRANSITIONS, and every
    edge names existing tests; the agent tests' conftest fails a named test that does not take its
    edge."""
    doc = doc_text()
    assert drawn_edges(doc) == set(TRANSITIONS)
    table = edge_table(doc)
    assert set(table) == set(TRANSITIONS)
    here = Path(__file__).parent
    sources = "".join(p.read_text(encoding="utf-8") for p in here.glob("test_*.py"))
    for edge, tests in table.items():
        assert tests, f"docs/agent.md names no test for {edge}"
        for name in tests:
            assert f"def {name}(" in sources, f"docs/agent.md names {name}, which does not exist"


def test_the_edge_check_fails_a_test_that_does_not_take_its_documented_edge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The conftest's check is real: a named test that takes its edges passes it, one that does not
    fails."""
    test, named = min(edges_of_test().items())
    with (
        pytest.raises(AssertionError, match=f"docs/agent.md says {test} takes"),
        takes_documented_edges(test, monkeypatch),
    ):
        pass
    with takes_documented_edges(test, monkeypatch) as taken:
        for source, target in sorted(named):
            trail = Trail()
            trail.state = source
            trail.move(target, "taken")
    assert taken == named
    assert Trail.move.__name__ == "move"  # the real method is back on leaving


def test_an_approval_that_cannot_be_asked_fails_cleanly(tmp_path: Path) -> None:
    def unreachable(mandate: Mandate) -> Decision:
        raise ConnectionError("the Prefect API went away")

    ctx = make_context(tmp_path, ScriptedProvider())
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, unreachable)
    assert (outcome.status, outcome.step) == ("failed", "approval")
    assert outcome.reason.startswith("unexpected ConnectionError: the Prefect API went away")
    assert edges(outcome) == [("critic", "approval"), ("approval", "failed")]
    assert_untouched(ctx, head)


@pytest.mark.slow
def test_a_coder_out_of_attempts_fails_at_logic_genesis(tmp_path: Path) -> None:
    def honest_tests(view: TestAuthorView) -> str:
        return OfflineProvider().test_author(view).diff

    def new_file_in_tests(view: CoderView) -> str:
        return "--- /dev/null\n+++ b/tests/strategies/test_more.py\n@@ -0,0 +1 @@\n+X = 1\n"

    provider = ScriptedProvider(test_author=[honest_tests], coder=[edit_tests, new_file_in_tests])
    ctx = make_context(tmp_path, provider)
    ctx = replace(ctx, agent=agent_settings(max_attempts=3))
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "logic-genesis")
    assert "ceiling of 3 role answers per repair" in outcome.reason
    assert edges(outcome) == HAPPY[:3] + [
        ("logic-genesis", "logic-genesis"),
        ("logic-genesis", "failed"),
    ]
    first, second = provider.coder_views
    assert first.last_verdict is not None and first.last_verdict["phase"] == "test-gen"
    assert first.failing_tests and all("test_daily_momentum" in t for t in first.failing_tests)
    assert second.last_verdict is not None
    assert second.last_verdict["violations"][0]["rule"] == "diff.locked_path"
    assert [r.phase for r in outcome.attempts] == ["test-gen", "code-patch", "code-patch"]
    assert_untouched(ctx, head)


@pytest.mark.slow
def test_a_failed_replay_sends_the_repair_back_to_the_tests_with_what_they_missed(
    tmp_path: Path,
) -> None:
    ctx = offline_context(tmp_path, "max_weekly_turnover")
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "promoted", outcome.reason
    assert edges(outcome) == HAPPY + [("cross-validation", "test-genesis")] + HAPPY[2:] + [
        ("cross-validation", "promotion"),
        ("promotion", "promoted"),
    ]
    assert outcome.rounds == 2
    first_code = next(r for r in outcome.attempts if r.phase == "code-patch")
    # Round 2: the offline Test Author saw what the replay found and wrote a test for it, from the
    # unchanged source: nothing the Coder wrote in round 1 was in its inputs.
    inputs = {
        i.label: json.loads((ctx.run_dir / i.file).read_text())
        for i in outcome.inputs
        if i.role == "test_author"
    }
    round_two = inputs["test-gen-2"]["view"]
    assert round_two["missed"][0]["check"] == "max_weekly_turnover"
    shown = strings(round_two)
    coders = new_lines(first_code.diff, ctx.versions.materialize("v1"))
    assert len(coders) > 20 and not [line for line in coders if line in shown]
    assert "_limit_trading" not in round_two["source"]["strategies/daily_momentum.py"]
    assert round_two["earlier_tests"] == [outcome.attempts[0].diff]  # its own round-1 tests
    assert "+++ b/tests/strategies/test_daily_momentum_missed.py" in outcome.attempts[2].diff
    # Round 2: the Coder was told why its accepted patch was sent back.
    coder_two = json.loads((ctx.run_dir / "inputs" / "coder-code-patch-2.json").read_text())["view"]
    assert [f["phase"] for f in coder_two["feedback"]] == ["code-patch", "cross-validation"]
    assert coder_two["feedback"][1]["violations"][0]["rule"] == "crossval.max_weekly_turnover"
    meta = ctx.versions.metadata("v2")
    assert meta["rounds"] == 2 and [d["round"] for d in meta["diffs"]] == [1, 1, 2, 2]
    assert "tests/strategies/test_daily_momentum_missed.py" in ctx.versions.git(
        "show", "--stat", "--format=", "v2~1"
    )


@pytest.mark.slow
def test_a_replay_failing_in_the_last_round_fails_the_repair(tmp_path: Path) -> None:
    ctx = offline_context(tmp_path, "max_weekly_turnover", max_rounds=1)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "cross-validation")
    assert (
        outcome.reason
        == "max_weekly_turnover: max_weekly_turnover breached in the replay (round 1 of 1)"
    )
    assert edges(outcome) == HAPPY + [("cross-validation", "failed")]
    assert outcome.cross_validation is not None and not outcome.cross_validation.passed
    assert_untouched(ctx, head)


@pytest.mark.slow
def test_a_deterministic_provider_is_not_asked_again_what_it_answered(tmp_path: Path) -> None:
    ctx = offline_context(tmp_path, "net_information_ratio", "net_information_ratio")
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "test-genesis")
    # The rules have no test for an IR shortfall: an empty answer, then no second ask.
    assert (
        "the offline provider is deterministic and nothing it reads changed since attempt 2"
        in outcome.reason
    )
    assert [
        (r.phase, r.verdict.violations[0].rule if r.verdict.violations else None)
        for r in outcome.attempts
    ] == [("test-gen", None), ("code-patch", None), ("test-gen", "diff.malformed")]
    assert edges(outcome)[-2:] == [("cross-validation", "test-genesis"), ("test-genesis", "failed")]
    assert_untouched(ctx, head)


@pytest.mark.slow
def test_a_failed_promotion_restores_the_workspace(tmp_path: Path) -> None:
    ctx = offline_context(tmp_path)
    passing = ctx.cross_validator

    def pass_then_lose_the_ledger(c: RepairContext, mandate: Mandate) -> CrossValidation:
        with c.versions.ledger.engine.begin() as conn:  # type: ignore[union-attr]
            conn.execute(sa.text("DROP TABLE strategy_versions"))
        return passing(c, mandate)

    ctx = replace(ctx, cross_validator=pass_then_lose_the_ledger)
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "promotion")
    assert edges(outcome)[-2:] == [("cross-validation", "promotion"), ("promotion", "failed")]
    assert ctx.versions.head() == head and [v.tag for v in ctx.versions.list()] == ["v1"]
    assert ctx.versions.git("status", "--porcelain") == "" and not ctx.candidate.exists()
