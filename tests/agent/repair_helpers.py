"""Shared pieces of the repair tests: a scripted provider, a context on a fresh workspace,
assertions."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from guardrails.gate import run_gate
from oomrl.agent.budget import Budget
from oomrl.agent.llm import Transcript
from oomrl.agent.offline_common import unified_diff
from oomrl.agent.roles import CoderView, CriticView, Mandate, Patch, TestAuthorView, read_tree
from oomrl.diagnostics.autopsy import Autopsy, LossAlert
from oomrl.diagnostics.mandate import Constraints
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.crossval import Check, CrossValidation
from oomrl.repair.loop import Decision, RepairContext
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import AgentSettings, get_settings
from tests.repair_inputs_for_tests import pending_alert

MANDATE = Mandate(
    module="strategies.daily_momentum",
    text="Trade weekly within ADV and turnover limits",
    constraints=Constraints(
        rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3
    ),
    alert_id="alert-0001",
)
AUTOPSY = pending_alert("alert-0001")
SOURCE = "strategies/daily_momentum.py"
TESTS = "tests/strategies/test_daily_momentum.py"


class ScriptedProvider:
    """Answers from lists, recording every view it was shown (what the agent saw as feedback)."""

    name = "scripted"

    def __init__(
        self,
        test_author: list[Callable[[TestAuthorView], str]] | None = None,
        coder: list[Callable[[CoderView], str]] | None = None,
    ) -> None:
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

    def answer_key(self, role: str, view: object) -> str | None:
        return None  # scripted answers change from call to call


def agent_settings(**changes: Any) -> AgentSettings:
    """The agent group as this test session configures it, with `changes`."""
    return AgentSettings.model_validate({**get_settings().agent.model_dump(), **changes})


def no_cross_validation(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
    raise AssertionError("cross-validation must not run after a failed genesis")


def offline_mandate(workspace: Path, autopsy: Autopsy | LossAlert | dict[str, Any]) -> Mandate:
    """The offline Critic's mandate as a repair asks for it: with the version's S and T to read (it
    names the old tests the mandate supersedes). JSON is validated by the Critic's view."""
    from oomrl.agent.providers import OfflineProvider

    return OfflineProvider().critic(
        CriticView(
            autopsy=autopsy,
            source=read_tree(workspace, "strategies"),
            tests=read_tree(workspace, "tests"),
        )
    )


def make_context(
    tmp_path: Path,
    provider: Any,
    budget: Budget | None = None,
    transcript: Transcript | None = None,
) -> RepairContext:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.create_schema()
    versions = StrategyVersions(tmp_path / "workspace", ledger)
    versions.init()
    versions.activate("v1", "paper", "daily_momentum")
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    agent = agent_settings(max_attempts=2, retries=1, backoff_s=0.01, timeout_s=5.0)
    return RepairContext(
        versions=versions,
        provider=provider,
        budget=budget or Budget.from_settings(agent),
        transcript=transcript or Transcript(run_dir / "transcript.jsonl"),
        run_dir=run_dir,
        account="paper",
        gate=run_gate,
        cross_validator=no_cross_validation,
        agent=agent,
        lock="namespace",
    )


def approve(mandate: Mandate) -> Decision:
    return Decision(action="approve")


def at_step(ctx: RepairContext, state: str) -> RepairContext:
    """A context whose machine stands at `state`, for calling one step directly."""
    ctx.state.trail.state = state
    return ctx


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
    return unified_diff(TESTS, old, old.replace("assert not strategy", "assert strategy", 1))


def edges(outcome: Any) -> list[tuple[str, str]]:
    """The transitions a repair took, as (from, to) pairs."""
    trail = outcome["trail"] if isinstance(outcome, dict) else outcome.trail
    return [(move["source"], move["target"]) for move in trail]


def replays(*failing: str) -> Callable[[RepairContext, Mandate], CrossValidation]:
    """A cross-validator whose n-th replay fails the named check ("" passes), then passes."""
    queue = list(failing)

    def validate(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
        name = queue.pop(0) if queue else ""
        checks = [Check(name="rebalance", passed=True, detail="at most 1 rebalance(s) per week")]
        if name:
            checks.append(Check(name=name, passed=False, detail=f"{name} breached in the replay"))
        return CrossValidation(
            start=date(2024, 3, 1), end=date(2024, 7, 15), rows=[], checks=checks
        )

    return validate


def strings(value: object) -> str:
    """Every string inside a JSON value, joined: what a role was shown, unescaped."""
    if isinstance(value, dict):
        return "\n".join(strings(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(strings(v) for v in value)
    return str(value)


def mark_account(ledger_url: str, account: str, days: list[str], nav: float = 1_000_000.0) -> None:
    """Flat mark-to-market NAV rows for `account` on `days` through the ledger's own marking
    write."""
    import pandas as pd

    from oomrl.portfolio.ledger import Ledger
    from oomrl.portfolio.ledger_tables import NAV_FIELDS

    ledger = Ledger(ledger_url)
    try:
        rows = pd.DataFrame(
            {
                "date": pd.to_datetime(days),
                **dict.fromkeys(NAV_FIELDS, 0.0),
                "nav": nav,
                "cash": nav,
                "reward": 0.0,
                "strategy_version": "v1",
            }
        )
        ledger.commit_marks(account, ledger.account(account).revision, rows, 0.0, 0.0)
    finally:
        ledger.engine.dispose()
