"""Providers: the offline rules (critic table, test author, coder), the replay transcript, the
factory."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from oomrl.agent.budget import Budget
from oomrl.agent.llm import Transcript
from oomrl.agent.offline_author import mandate_tests, supersede
from oomrl.agent.offline_coder import reference_change
from oomrl.agent.offline_common import unified_diff
from oomrl.agent.providers import OfflineProvider, ReplayBackend, alert_type, get_provider
from oomrl.agent.roles import CoderView, CriticView, LLMProvider, Mandate, prompt_text
from oomrl.checkout import repo_root
from oomrl.diagnostics.autopsy import Autopsy, LossAlert
from oomrl.diagnostics.mandate import Constraints
from oomrl.errors import ProviderError
from oomrl.settings import get_settings
from tests.repair_inputs_for_tests import autopsy_json, full_autopsy, pending_alert

WEEKLY = Constraints(rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3)


def mandate(**constraints: object) -> Mandate:
    return Mandate(
        module="strategies.daily_momentum",
        text="m",
        alert_id="a-1",
        constraints=Constraints.model_validate(constraints),
    )


CALM = {**autopsy_json()["metrics"], "slippage_leakage": 0.001, "turnover_annualized": 5.0}


def fired(rule: str, **metrics: float) -> Autopsy:
    """The fixture autopsy fired by `rule`, with calm metrics but `metrics`."""
    trigger = {**autopsy_json()["trigger"], "rule": rule}
    return full_autopsy(trigger=trigger, metrics={**CALM, **metrics})


@pytest.mark.parametrize(
    ("autopsy", "kind"),
    [
        (fired("execution_decay"), "execution_decay"),
        (fired("turnover_spike"), "turnover_spike"),
        (fired("slippage-alarm"), "execution_decay"),
        (fired("external", slippage_leakage=0.02), "execution_decay"),
        (fired("external", turnover_annualized=60.0), "turnover_spike"),
        (fired("principal_loss", slippage_leakage=0.02), "loss"),
        (fired("external"), "loss"),
        (LossAlert(alert_id="a-1", account="paper"), "loss"),  # no rule, no metrics: a loss
    ],
)
def test_alert_types_come_from_the_rule_else_the_metrics(
    autopsy: Autopsy | LossAlert, kind: str
) -> None:
    assert alert_type(autopsy) == kind


def test_offline_critic_maps_the_alert_and_keeps_the_autopsys_constraints() -> None:
    critic = OfflineProvider().critic
    plain = critic(CriticView(autopsy=pending_alert("x1", module="strategies.weekly_liquidity")))
    assert plain.module == "strategies.weekly_liquidity" and plain.alert_id == "x1"
    assert plain.constraints.rebalance == "weekly" and plain.constraints.max_weekly_turnover == 0.3
    assert "'loss'" in plain.rationale
    turnover = critic(
        CriticView(autopsy=fired("turnover_spike").model_copy(update={"alert_id": "x2"}))
    )
    assert turnover.alert_id == "x2" and "turnover_spike" in turnover.rationale
    given = critic(
        CriticView(
            autopsy=full_autopsy(
                mandate="Be gentle",
                constraints={
                    "rebalance": "monthly",
                    "max_adv_participation": 0.02,
                    "max_weekly_turnover": 0.1,
                    "max_drawdown": None,
                },
            )
        )
    )
    assert given.text == "Be gentle" and given.module == "strategies.daily_momentum"
    assert (given.constraints.rebalance, given.constraints.max_adv_participation) == (
        "monthly",
        0.02,
    )
    bare = critic(CriticView(autopsy=LossAlert(alert_id="x3", account="paper")))
    # The bundled default
    assert bare.module == "strategies.daily_momentum" and bare.alert_id == "x3"


def test_offline_coder_writes_a_real_diff_that_only_touches_the_module() -> None:
    source = (repo_root() / "strategies" / "daily_momentum.py").read_text()
    view = CoderView(
        mandate=mandate(rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3),
        tests={},
        source={"strategies/daily_momentum.py": source},
    )
    diff = OfflineProvider().coder(view).diff
    assert diff.startswith(
        "--- a/strategies/daily_momentum.py\n+++ b/strategies/daily_momentum.py\n"
    )
    assert (
        "+        return last_rebalance is None or iso_week(day) != iso_week(last_rebalance)"
        in diff
    )
    assert "+    max_weekly_turnover: float = Field(0.3" in diff
    with pytest.raises(ProviderError, match="not in the workspace"):
        OfflineProvider().coder(view.model_copy(update={"source": {}}))


def test_reference_change_is_idempotent_on_a_compliant_module() -> None:
    source = (repo_root() / "strategies" / "daily_momentum.py").read_text()
    once = reference_change(source, mandate(rebalance="monthly", max_adv_participation=0.1))
    assert "(day.year, day.month) != (last_rebalance.year, last_rebalance.month)" in once
    assert "max_weekly_turnover: float = Field(2.0" in once  # no limit given: an open one
    twice = reference_change(once, mandate(rebalance="monthly", max_adv_participation=0.1))
    assert twice.count("def _limit_trading(") == 1 and twice.count("adv_window: int") == 1
    ast.parse(twice)


def test_reference_change_refuses_a_module_without_the_protocol() -> None:
    with pytest.raises(ValueError, match="cannot change it"):
        reference_change("X = 1\n", mandate(rebalance="weekly"))


@pytest.mark.parametrize("rebalance", ["weekly", "biweekly", "monthly"])
def test_mandate_tests_compile_for_each_schedule(rebalance: str) -> None:
    text = mandate_tests(mandate(rebalance=rebalance, max_weekly_turnover=0.2))
    tree = ast.parse(text)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    period = {"weekly": "week", "biweekly": "fortnight", "monthly": "month"}[rebalance]
    assert f"test_mandate_rebalances_at_most_once_per_{period}" in names
    assert "MAX_WEEKLY_TURNOVER = 0.2" in text and "MAX_ADV_PARTICIPATION" not in text


def test_schedule_only_mandate_needs_no_market() -> None:
    text = mandate_tests(mandate(rebalance="weekly"))
    assert "mandate_market" not in text and "import pandas" not in text
    ast.parse(text)


def test_supersede_keeps_names_and_signatures() -> None:
    old = (
        'def test_daily(x) -> None:\n    """Trades daily."""\n    assert '
        'STRATEGY.rebalance_due(1, 0)\n\n\n'
        'def test_weights() -> None:\n    assert 1 + 1 == 2\n\n\ndef test_kept() -> '
        'None:\n    assert True\n'
    )
    new = supersede(
        old, ["test_daily", "test_weights"], mandate(rebalance="weekly", max_weekly_turnover=0.3)
    )
    tree = ast.parse(new)
    assert [n.name for n in tree.body] == ["test_daily", "test_weights", "test_kept"]
    assert "def test_daily(x) -> None:" in new and "It used to pin: Trades daily." in new
    assert "<= 0.3 + 1e-9" in new and "<= 1.0 * 1e9" in new  # no ADV limit given: an open one
    assert new.endswith("def test_kept() -> None:\n    assert True\n")


def test_unified_diff_marks_new_files_and_missing_newlines() -> None:
    assert unified_diff("tests/t.py", None, "a\n").startswith("--- /dev/null\n+++ b/tests/t.py\n")
    assert "\\ No newline at end of file" in unified_diff("s.py", "a\n", "b")


def test_offline_test_author_adds_a_new_file_next_to_an_existing_one(tmp_path: Path) -> None:
    view_tests = {
        "tests/strategies/test_daily_momentum_mandate.py": "def test_x():\n    assert 1\n"
    }
    from oomrl.agent.roles import TestAuthorView

    patch = OfflineProvider().test_author(
        TestAuthorView(mandate=mandate(rebalance="weekly"), source={}, tests=view_tests)
    )
    assert "+++ b/tests/strategies/test_daily_momentum_mandate_2.py" in patch.diff
    assert "superseded 0 old tests" in patch.notes


def test_offline_test_author_rewrites_exactly_the_old_tests_the_mandate_names() -> None:
    from oomrl.agent.roles import TestAuthorView

    path = "tests/strategies/test_daily_momentum.py"
    old = (
        'def test_daily() -> None:\n    """Trades daily."""\n    assert '
        'STRATEGY.rebalance_due(1, 0)\n\n\n'
        'def test_also_daily() -> None:\n    assert STRATEGY.rebalance_due(2, 1)\n'
    )
    named = mandate(rebalance="weekly").model_copy(update={"supersedes": [f"{path}::test_daily"]})
    patch = OfflineProvider().test_author(
        TestAuthorView(mandate=named, source={}, tests={path: old})
    )
    assert "superseded 1 old tests" in patch.notes
    changed = [
        line
        for line in patch.diff.splitlines()
        if line.startswith("-") and not line.startswith("---")
    ]
    assert changed and all("rebalance_due(2, 1)" not in line for line in changed)  # unnamed: kept
    unnamed = OfflineProvider().test_author(
        TestAuthorView(mandate=mandate(rebalance="weekly"), source={}, tests={path: old})
    )
    assert f"--- a/{path}" not in unnamed.diff and "superseded 0 old tests" in unnamed.notes


def test_replay_provider_answers_from_a_recorded_transcript(tmp_path: Path) -> None:
    recorded = Transcript(tmp_path / "recorded.jsonl")
    recorded.append("request", "critic", messages=[])
    recorded.append(
        "response",
        "critic",
        content=json.dumps(mandate(rebalance="weekly").model_dump()),
        usage={"prompt_tokens": 10, "completion_tokens": 5},
    )
    settings = get_settings(store={"home": tmp_path / "home"})
    budget = Budget(
        max_tokens=100_000, max_cost_usd=1, price_prompt_per_mtok=0, price_completion_per_mtok=0
    )
    provider = get_provider(
        "replay", settings, budget, Transcript(tmp_path / "new.jsonl"), replay_from=recorded.path
    )
    assert isinstance(provider, LLMProvider) and provider.name == "replay"
    assert (
        provider.critic(CriticView(autopsy=pending_alert("a-1"))).constraints.rebalance == "weekly"
    )
    assert budget.tokens_spent == 15
    with pytest.raises(ProviderError, match="no more critic responses"):
        provider.critic(CriticView(autopsy=pending_alert("a-1")))
    with pytest.raises(ProviderError, match="does not exist"):
        ReplayBackend(tmp_path / "missing.jsonl")


def test_get_provider_defaults_and_errors(tmp_path: Path) -> None:
    settings = get_settings(store={"home": tmp_path})
    budget = Budget(
        max_tokens=1, max_cost_usd=1, price_prompt_per_mtok=0, price_completion_per_mtok=0
    )
    transcript = Transcript(tmp_path / "t.jsonl")
    assert get_provider(None, settings, budget, transcript).name == "offline"
    live = get_provider(
        None,
        get_settings(store={"home": tmp_path}, agent={"llm_base_url": "http://127.0.0.1:9/v1"}),
        budget,
        transcript,
    )
    assert live.name == "openai"
    with pytest.raises(ProviderError, match="needs a transcript"):
        get_provider("replay", settings, budget, transcript)
    with pytest.raises(ProviderError, match="unknown provider 'gpt'"):
        get_provider("gpt", settings, budget, transcript)


def test_every_role_has_its_prompt_file() -> None:
    for role in ("critic", "test_author", "coder"):
        assert prompt_text(role).startswith("# Role:")


def test_an_offline_run_replays_answer_for_answer(tmp_path: Path) -> None:
    source = (repo_root() / "strategies" / "daily_momentum.py").read_text()
    settings = get_settings(store={"home": tmp_path / "home"})
    budget = Budget(
        max_tokens=100_000, max_cost_usd=1, price_prompt_per_mtok=0, price_completion_per_mtok=0
    )
    recorded = Transcript(tmp_path / "offline.jsonl")
    offline = get_provider("offline", settings, budget, recorded)
    critic_view = CriticView(autopsy=fired("execution_decay").model_copy(update={"alert_id": "r1"}))
    coder_view = CoderView(
        mandate=mandate(rebalance="weekly"),
        tests={},
        source={"strategies/daily_momentum.py": source},
    )
    first = (offline.critic(critic_view), offline.coder(coder_view))
    assert [r["kind"] for r in recorded.records()] == ["request", "response"] * 2
    replayed = get_provider(
        "replay", settings, budget, Transcript(tmp_path / "again.jsonl"), replay_from=recorded.path
    )
    assert (replayed.critic(critic_view), replayed.coder(coder_view)) == first
    assert budget.tokens_spent == 0
