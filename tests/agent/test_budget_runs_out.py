"""Budget as capital: an account's LLM budget runs out mid-repair; the repair stops with that
reason, the ledger never goes below zero by more than one request's maximum, and the account report
shows the cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomrl.agent.capital import LLMBudgetBook
from oomrl.agent.providers import OfflineProvider
from oomrl.agent.roles import TestAuthorView, read_tree
from oomrl.data.store import MarketStore
from oomrl.metrics.attribution import account_report
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.loop import Decision, open_context, run_repair
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.agent.fake_openai import ScriptedAgent, serve_fake_openai
from tests.agent.repair_helpers import offline_mandate
from tests.diagnostics.conftest import seed_account_home
from tests.repair_inputs_for_tests import pending_alert

AUTOPSY = pending_alert("alert-budget-0001", account="demo")
MAX_OUTPUT = 30_000  # each call may answer at length, and this server always bills all it may


def honest_answers(workspace: Path) -> dict[str, list[str]]:
    StrategyVersions(workspace).init()
    rules = OfflineProvider()
    mandate = offline_mandate(workspace, AUTOPSY)
    tests = rules.test_author(
        TestAuthorView(
            mandate=mandate,
            source=read_tree(workspace, "strategies"),
            tests=read_tree(workspace, "tests"),
        )
    )
    return {
        "critic": [mandate.model_dump_json()],
        "test_author": [tests.model_dump_json()],
        "coder": ['{"diff": "", "notes": "never asked"}'],
    }


@pytest.mark.slow
def test_an_account_that_runs_out_mid_repair_stops_and_its_report_shows_the_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    seed_account_home(home, "demo")  # the sample store and a year of NAV for account demo
    monkeypatch.setenv("OOMRL_HOME", str(home))
    monkeypatch.setenv("OOMRL_AGENT_MAX_OUTPUT_TOKENS", str(MAX_OUTPUT))
    ledger = Ledger(get_settings().ledger_url)
    ledger.create_schema()
    # The seeded history names made-up versions; the repair starts from one the workspace holds.
    versions = StrategyVersions(get_settings().store.workspace_dir, ledger)
    versions.init()
    versions.activate("v1", "demo", "daily_momentum")
    book = LLMBudgetBook(ledger)
    book.open_account("demo", 70_000, 1.0)  # the account's capital: less than a whole repair needs
    answers = honest_answers(tmp_path / "scratch")
    with serve_fake_openai() as server:
        server.agent = ScriptedAgent(answers, billing="max")
        monkeypatch.setenv("OOMRL_LLM_BASE_URL", server.url)  # an endpoint: the provider is openai
        ctx = open_context(get_settings(), AUTOPSY)
        outcome = run_repair(AUTOPSY, ctx, lambda m: Decision(action="approve"))

    assert (outcome.status, outcome.step) == ("failed", "logic-genesis")
    assert outcome.reason.startswith(
        "out of money: cannot afford the next step (coder: a prompt of up to"
    )
    assert [r.phase for r in outcome.attempts] == ["test-gen"] and outcome.attempts[0].accepted
    assert [(m["source"], m["target"]) for m in outcome.trail][-2:] == [
        ("test-genesis", "logic-genesis"),
        ("logic-genesis", "failed"),
    ]
    assert [r["messages"][0]["content"].splitlines()[0][:20] for r in server.requests] == [
        "# Role: Critic",
        "# Role: Test Author ",
    ]  # the Coder was never asked

    # Every call was reserved before it was sent and debited before its answer was used; the
    # balance never went below zero by more than one request's declared maximum (here: not at all).
    calls = book.calls("demo")
    assert [(c["role"], c["status"]) for c in calls] == [
        ("critic", "settled"),
        ("test_author", "settled"),
    ]
    for call, request in zip(calls, server.requests, strict=True):
        assert call["completion_tokens"] == request["max_tokens"]  # billed the most it could
        assert call["prompt_tokens"] + call["completion_tokens"] <= call["held_tokens"]
        assert (
            call["tokens_left_after"] >= -request["max_tokens"] and call["tokens_left_after"] >= 0
        )
        # Money too
        assert 0 < call["cost_nusd"] <= call["held_nusd"] and call["nusd_left_after"] >= 0
    balance = book.balance("demo")
    assert balance.tokens_held == 0 and 0 <= balance.tokens_left < 70_000 // 10
    assert balance.usd_held == 0 and 0 < balance.usd_left < 1.0
    assert outcome.budget["account_balance"]["tokens_left"] == balance.tokens_left
    assert get_settings().agent.max_output_tokens == MAX_OUTPUT

    # The account's report puts the cost of alignment beside its trading PnL.
    report = account_report(ledger, MarketStore(home / "data"), "demo", tmp_path / "report")
    text = report.markdown.read_text()
    spent = balance.tokens_spent
    assert (
        f"Cost of alignment: 1 repair(s), 2 model call(s), {spent:,} tokens, "
        f"${balance.usd_spent:.4f}" in text
    )
    assert "trading PnL over the account's history:" in text and " CNY after " in text
