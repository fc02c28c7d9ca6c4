"""Roles that cannot see each other's work: the Test Author's prompts never hold the Coder's change,
the Coder's never hold the held-out tests; through the real `openai` client and the real gate."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from oomrl.agent.budget import Budget
from oomrl.agent.llm import LLMClient, OpenAIBackend, Transcript
from oomrl.agent.offline_coder import reference_change
from oomrl.agent.offline_common import unified_diff
from oomrl.agent.providers import OfflineProvider
from oomrl.agent.roles import LLMProvider, TestAuthorView, read_tree
from oomrl.repair.loop import run_repair
from oomrl.repair.versions import StrategyVersions
from tests.agent.cheating_agent import MODULE, only_at_test_capital, write_held_out
from tests.agent.fake_openai import ScriptedAgent, role_of, serve_fake_openai
from tests.agent.repair_helpers import (
    AUTOPSY,
    agent_settings,
    approve,
    edges,
    make_context,
    offline_mandate,
    replays,
    strings,
)

CODER_MARKER = "coder-only-5e0c"
HELDOUT_MARKER = "heldout-only-a771"
MISSED = [
    {
        "check": "max_weekly_turnover",
        "detail": "max_weekly_turnover breached in the replay",
        "window": "2024-03-01..2024-07-15",
    }
]


def scripted(workspace: Path) -> dict[str, list[str]]:
    """Two rounds of honest answers (the replay fails the first); the Coder first special-cases."""
    StrategyVersions(workspace).init()
    rules = OfflineProvider()
    mandate = offline_mandate(workspace, AUTOPSY)
    source, tests = read_tree(workspace, "strategies"), read_tree(workspace, "tests")
    round_one = rules.test_author(TestAuthorView(mandate=mandate, source=source, tests=tests))
    round_two = rules.test_author(
        TestAuthorView(mandate=mandate, source=source, tests=tests, missed=MISSED)
    )
    honest = reference_change(source[MODULE], mandate).replace(
        "class DailyMomentum:", f"# {CODER_MARKER}: the Coder's own words\nclass DailyMomentum:", 1
    )
    fix = json.dumps({"diff": unified_diff(MODULE, source[MODULE], honest), "notes": CODER_MARKER})
    cheat = json.dumps(
        {
            "diff": unified_diff(MODULE, source[MODULE], only_at_test_capital(honest)),
            "notes": "limits only at the tests' capital",
        }
    )
    return {
        "critic": [mandate.model_dump_json()],
        "test_author": [round_one.model_dump_json(), round_two.model_dump_json()],
        "coder": [cheat, fix, fix],
    }


def lines_of(text: str, before: str) -> list[str]:
    """The substantial lines of `text` that `before` did not already hold."""
    return [
        line.strip()
        for line in text.splitlines()
        if len(line.strip()) > 30 and line.strip() not in before
    ]


@pytest.mark.slow
def test_the_test_author_never_sees_the_coders_work_nor_the_coder_the_held_out_tests(
    tmp_path: Path,
) -> None:
    answers = scripted(tmp_path / "scratch")
    held_out = write_held_out(tmp_path / "held-out", HELDOUT_MARKER)
    knobs = agent_settings(max_attempts=8, retries=0, timeout_s=30.0)
    with serve_fake_openai() as server:
        agent = ScriptedAgent(answers)
        server.agent = agent
        budget = Budget.from_settings(knobs)
        transcript = Transcript(tmp_path / "transcript.jsonl")
        client = LLMClient(
            OpenAIBackend(server.url, "k", "fake-model", 30.0, 30.0), budget, transcript, knobs
        )
        ctx = make_context(tmp_path, LLMProvider(client), budget, transcript)
        ctx = replace(ctx, agent=knobs, holdout=held_out)
        ctx = replace(ctx, cross_validator=replays("max_weekly_turnover"))
        outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "promoted", outcome.reason
    assert ("cross-validation", "test-genesis") in edges(outcome) and outcome.rounds == 2
    assert [(r.phase, r.accepted) for r in outcome.attempts] == [
        ("test-gen", True),
        ("code-patch", False),
        ("code-patch", True),
        ("test-gen", True),
        ("code-patch", True),
    ]

    # Lines both roles may see anyway: the workspace as it was, and the tests the Test Author wrote.
    original = "\n".join(
        [p.read_text() for p in ctx.versions.materialize("v1").rglob("*.py")]
        + [r.diff for r in outcome.attempts if r.phase == "test-gen"]
    )
    coder_work = [
        line
        for r in outcome.attempts
        if r.phase == "code-patch"
        for line in lines_of(
            "\n".join(
                x[1:] for x in r.diff.splitlines() if x.startswith("+") and not x.startswith("+++")
            ),
            original,
        )
    ] + [CODER_MARKER]
    held_out_code = lines_of((held_out / "test_heldout_capital.py").read_text(), original)
    assert len(coder_work) > 20 and len(held_out_code) > 3
    promoted = ctx.versions.git("show", "v2:strategies/daily_momentum.py")
    assert sum(line in promoted for line in coder_work) > 20  # we look for what the Coder wrote

    def prompts(role: str) -> list[str]:  # the system prompt, and the view as the model read it
        return [
            r["messages"][0]["content"] + strings(json.loads(r["messages"][-1]["content"]))
            for r in server.requests
            if role_of(r) == role
        ]

    def recorded(role: str) -> list[str]:
        return [
            strings(json.loads((ctx.run_dir / i.file).read_text()))
            for i in outcome.inputs
            if i.role == role
        ]

    # The Test Author, in both rounds (the second after the Coder's patch was accepted and
    # replayed), was shown nothing the Coder wrote: not in its prompt, not in the inputs recorded
    # for audit.
    author = prompts("test_author") + recorded("test_author")
    assert len(author) == 4 and "max_weekly_turnover breached" in author[1]
    assert not [line for text in author for line in coder_work if line in text]
    # The Coder was shown nothing of the held-out tests but the name of the one its cheat failed.
    coder = prompts("coder") + recorded("coder")
    assert len(coder) == 6
    assert not [line for text in coder for line in held_out_code if line in text]
    assert all(HELDOUT_MARKER not in text for text in coder)
    told = agent.shown["coder"][1]["last_verdict"]["violations"][0]
    assert told["rule"] == "holdout.failed" and told["code"] is None
    assert told["message"].endswith(
        "test_heldout_capital.py::test_turnover_budget_holds_at_three_billion"
    )
