"""End to end: a scripted agent tries to game the tests, through the real `openai` client, the real
gate and the Prefect repair flow; each cheat is rejected and fed back, and the honest fix is
promoted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oomrl.agent.capital import LLMBudgetBook
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.agent.cheating_agent import CHEATS, scripted_answers, write_held_out
from tests.agent.fake_openai import ScriptedAgent, serve_fake_openai

pytestmark = pytest.mark.usefixtures("prefect_harness")

ACCOUNT = "cheater"
HELDOUT_MARKER = "HELDOUT-4b1e-never-shown"
CODER_MARKER = "CODER-9d2c-honest-fix"


def flow_artifacts(flow_run_id: Any) -> dict[str, Any]:
    """The artifacts one flow run published, by key."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found if a.key}


def test_a_cheating_agent_is_rejected_at_every_cheat_and_its_honest_fix_is_promoted(
    repair_home: Path,
    daily_momentum_autopsy: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.repair import repair

    autopsy = daily_momentum_autopsy
    answers = scripted_answers(tmp_path / "scratch-workspace", autopsy, marker=CODER_MARKER)
    held_out = write_held_out(
        tmp_path / "held-out", HELDOUT_MARKER, autopsy["constraints"]["max_weekly_turnover"]
    )
    monkeypatch.setenv("OOMRL_AGENT_HOLDOUT_DIR", str(held_out))
    Ledger(get_settings().ledger_url).open_account(
        ACCOUNT, 10_000_000
    )  # its own account and events
    with serve_fake_openai() as server:
        agent = ScriptedAgent(answers)
        server.agent = agent
        monkeypatch.setenv("OOMRL_LLM_BASE_URL", server.url)  # an endpoint: the provider is openai
        state = repair(autopsy, auto_approve=True, account=ACCOUNT, return_state=True)
    outcome = state.result()
    assert outcome["status"] == "promoted", outcome["reason"]
    assert outcome["version"]["tag"] == "v2"

    # Every cheat was rejected by the gate, with the rule that stops its kind of gaming.
    judged = [
        (
            a["phase"],
            a["verdict"]["accepted"],
            a["verdict"]["violations"][0]["rule"] if a["verdict"]["violations"] else None,
        )
        for a in outcome["attempts"]
    ]
    assert judged == [
        ("test-gen", False, "tests.removed_test"),
        ("test-gen", True, None),
        ("code-patch", False, "diff.locked_path"),
        ("code-patch", False, "diff.forbidden_file"),
        ("code-patch", False, "sanitizer.import_not_allowed"),
        ("code-patch", False, "holdout.failed"),
        ("code-patch", True, None),
    ]
    assert [a["notes"] for a in outcome["attempts"] if a["phase"] == "code-patch"] == [
        *CHEATS,
        "honest fix",
    ]

    # Each rejection went back to the agent, encoded: rule, file, line, message.
    coder_seen = agent.shown["coder"]
    for n, seen in enumerate(coder_seen[1:], start=1):
        rejected = outcome["attempts"][1 + n]["verdict"]["violations"][0]
        told = seen["last_verdict"]["violations"][0]
        assert (told["rule"], told["file"]) == (rejected["rule"], rejected["path"])
        assert len([f for f in seen["feedback"] if f["phase"] == "code-patch"]) == n
    assert (
        coder_seen[1]["last_verdict"]["violations"][0]["file"]
        == "tests/strategies/test_daily_momentum_mandate.py"
    )
    assert "held-out test failed" in coder_seen[4]["last_verdict"]["violations"][0]["message"]
    assert (
        agent.shown["test_author"][1]["feedback"][0]["violations"][0]["rule"]
        == "tests.removed_test"
    )
    # Neither the held-out tests' code nor the Coder's work ever reached the other role.
    assert all(HELDOUT_MARKER not in json.dumps(seen) for seen in coder_seen)
    assert all(CODER_MARKER not in json.dumps(seen) for seen in agent.shown["test_author"])

    # The honest fix is what trades now.
    settings = get_settings()
    ledger = Ledger(settings.ledger_url)
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    assert versions.ledger.active_version(ACCOUNT) == outcome["version"]["sha"]
    assert CODER_MARKER in versions.git("show", "v2:strategies/daily_momentum.py")
    meta = versions.metadata("v2")
    assert [v["accepted"] for v in meta["verdicts"]] == [
        False,
        True,
        False,
        False,
        False,
        False,
        True,
    ]
    assert [m["target"] for m in meta["trail"]][-2:] == ["cross-validation", "promotion"]
    assert [m["target"] for m in outcome["trail"]][-1] == "promoted"

    # Every call was debited in the ledger before its answer was used.
    calls = LLMBudgetBook(ledger).calls(ACCOUNT)
    assert [c["role"] for c in calls] == ["critic", "test_author", "test_author", *["coder"] * 5]
    assert all(c["status"] == "settled" and c["cost_nusd"] > 0 for c in calls)
    spent = sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls)
    assert outcome["budget"]["tokens_spent"] == spent and len(server.requests) == len(calls)
    assert outcome["budget"]["account_balance"]["tokens_spent"] == spent

    # Transcript, verdicts and budget are artifacts of the flow run.
    artifacts = flow_artifacts(state.state_details.flow_run_id)
    assert {
        "repair-transcript",
        "repair-budget",
        "repair-trail",
        "repair-outcome",
        "repair-test-gen-1",
        "repair-test-gen-2",
        *[f"repair-code-patch-{n}" for n in range(1, 6)],
        "repair-cross-validation",
    } <= set(artifacts)
    assert "holdout.failed" in artifacts["repair-code-patch-4"].data
    transcript = json.loads(artifacts["repair-transcript"].data)
    assert [row["kind"] for row in transcript].count("response") == 8
    budget = json.loads(artifacts["repair-budget"].data)
    assert budget[0]["tokens"] == spent and budget[1]["scope"] == f"account {ACCOUNT}"
