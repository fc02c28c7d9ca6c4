"""The offline Critic and Test Author: old tests that pin forbidden behaviour, found on the
unchanged source by a probe and named by the mandate; new bodies for exactly those; tests for what
cross-validation found missing; and never a look at the Coder's work."""

from __future__ import annotations

import ast
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from oomrl.agent import mandate_probe, offline_author
from oomrl.agent.offline_author import missed_tests, pinned_tests
from oomrl.agent.providers import OfflineProvider
from oomrl.agent.roles import CriticView, Mandate, MissedCheck, TestAuthorView, read_tree
from oomrl.checkout import repo_root
from oomrl.diagnostics.mandate import Constraints
from tests.repair_inputs_for_tests import autopsy_json, full_autopsy

WEEKLY = Constraints(rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3)
MANDATE = Mandate(
    module="strategies.daily_momentum", text="weekly, capped", alert_id="a-1", constraints=WEEKLY
)
PINNING = {
    "test_trades_every_new_session",
    "test_rotates_the_whole_book_when_leadership_changes",
    "test_picks_the_top_k_movers_with_equal_weight_even_when_illiquid",
    "test_ignores_names_without_a_bar_on_the_decision_date",
    "test_only_index_members_are_picked",
    "test_decides_on_as_of_with_only_the_rows_up_to_it",
}
OLD_TESTS = "tests/strategies/test_daily_momentum.py"


def bundled(top: str) -> dict[str, str]:
    found = read_tree(repo_root(), top)
    return {
        path: text
        for path, text in found.items()
        if not path.startswith("tests/") or path.startswith("tests/strategies/")
    }


@pytest.mark.slow
def test_the_probe_names_the_old_tests_that_watch_the_old_code_break_the_mandate() -> None:
    pinned = pinned_tests(bundled("strategies"), bundled("tests/strategies"), MANDATE)
    assert set(pinned) == {f"{OLD_TESTS}::{name}" for name in PINNING}
    assert all(reason.startswith(("rebalance", "max_")) for reason in pinned.values()), pinned
    schedule_only = pinned_tests(
        bundled("strategies"),
        bundled("tests/strategies"),
        MANDATE.model_copy(update={"constraints": Constraints(rebalance="weekly")}),
    )
    assert list(schedule_only) == [f"{OLD_TESTS}::test_trades_every_new_session"]


@pytest.mark.slow
def test_the_offline_critic_names_the_old_tests_its_mandate_supersedes() -> None:
    trigger = {**autopsy_json()["trigger"], "rule": "execution_decay"}
    view = CriticView(
        autopsy=full_autopsy(
            alert_id="a-1",
            trigger=trigger,
            constraints={
                "rebalance": "weekly",
                "max_adv_participation": 0.05,
                "max_weekly_turnover": 0.3,
            },
        ),
        source=bundled("strategies"),
        tests=bundled("tests/strategies"),
    )
    mandate = OfflineProvider().critic(view)
    assert set(mandate.supersedes) == {f"{OLD_TESTS}::{name}" for name in PINNING}
    assert f"{OLD_TESTS}::test_trades_every_new_session: rebalance" in mandate.rationale  # and why
    assert OfflineProvider().critic(view.model_copy(update={"source": {}})).supersedes == []


def test_probe_rules_on_schedules_turnover_and_participation() -> None:
    c = WEEKLY.model_dump(exclude_none=True)
    assert mandate_probe.schedule_breaches(date(2024, 7, 2), date(2024, 7, 1), True, c)
    assert not mandate_probe.schedule_breaches(date(2024, 7, 8), date(2024, 7, 5), True, c)
    assert not mandate_probe.schedule_breaches(date(2024, 7, 2), date(2024, 7, 1), False, c)
    assert not mandate_probe.schedule_breaches(date(2024, 7, 2), None, True, c)
    assert not mandate_probe.schedule_breaches(date(2024, 7, 2), date(2024, 7, 1), True, {})

    adv = {"A": 1e9, "B": 1e10}
    found = mandate_probe.weight_breaches(adv, 1e9, {"B": 0.2}, {"A": 0.1, "B": 0.0}, c)
    assert found == [
        "max_adv_participation: A traded 100000000 against an ADV of 1000000000 (cap 0.05)"
    ]
    found = mandate_probe.weight_breaches(adv, 1e9, {}, {"B": 0.4}, c)
    assert found == ["max_weekly_turnover: one call traded 0.4000 (budget 0.3)"]
    assert mandate_probe.weight_breaches({}, 1e9, {}, {"B": 0.1}, c) == []


def test_the_probe_measures_adv_as_the_view_does_up_to_the_decision_date() -> None:
    index = pd.bdate_range("2024-05-01", periods=25)
    close = pd.DataFrame({"A": 10.0, "B": 20.0}, index=index)
    amount = pd.DataFrame({"A": float("nan"), "B": 5e8}, index=index)
    amount.iloc[-1] = 1e12  # after the decision date below: never counted
    panels = {"close": close, "volume": close * 0 + 1e6, "amount": amount}
    adv = mandate_probe.traded_value(panels, index[-2])
    assert adv == {"A": pytest.approx(1e7), "B": pytest.approx(5e8)}


def test_the_probe_watches_without_changing_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    class Strategy:  # shaped as strategy_host.HostedStrategy, the client the probe wraps
        name = "watched"

        def rebalance_due(self, day: date, last: date | None) -> bool:
            return True

        def target_weights(
            self,
            panels: object,
            as_of: object = None,
            holdings: object = None,
            portfolio_value: float = 1.0,
            members: object = None,
        ) -> dict:
            return {"A": 0.9}

    monkeypatch.setattr(mandate_probe, "FOUND", {})
    monkeypatch.setattr(mandate_probe, "CURRENT", ["t.py::test_a"])
    mandate_probe._watch(Strategy, "watched", {"rebalance": "weekly", "max_weekly_turnover": 0.3})
    assert Strategy().rebalance_due(date(2024, 7, 2), date(2024, 7, 1)) is True
    assert Strategy().target_weights(None, holdings={"A": "not a number"}) == {"A": 0.9}  # no crash
    assert Strategy().target_weights(None, holdings={}) == {"A": 0.9}
    assert [t.split(":")[0] for t in mandate_probe.FOUND["t.py::test_a"]] == [
        "rebalance",
        "max_weekly_turnover",
    ]


def test_missed_checks_become_tests_only_where_rules_can_write_them() -> None:
    weeks = missed_tests(
        MANDATE, [MissedCheck(check="max_weekly_turnover", detail="busiest week 0.9")]
    )
    assert weeks is not None and "def test_mandate_holds_over_three_weeks_of_sessions" in weeks
    assert "tuple(day.isocalendar()[:2])" in weeks and "MISSED_TURNOVER_BUDGET = 0.3" in weeks
    ast.parse(weeks)
    both = missed_tests(
        MANDATE,
        [
            MissedCheck(check="rebalance", detail="2"),
            MissedCheck(check="max_adv_participation", detail="0.2"),
        ],
    )
    assert (
        both is not None and "test_mandate_caps_adv_participation_at_ten_times_the_capital" in both
    )
    monthly = missed_tests(
        MANDATE.model_copy(update={"constraints": Constraints(rebalance="monthly")}),
        [
            MissedCheck(check="rebalance", detail="2"),
            MissedCheck(check="max_adv_participation", detail="x"),
        ],
    )
    assert (
        monthly is not None
        and "(day.year, day.month)" in monthly
        and "MISSED_ADV_CAP" not in monthly
    )
    assert missed_tests(MANDATE, [MissedCheck(check="net_information_ratio", detail="-2")]) is None
    daily = MANDATE.model_copy(update={"constraints": Constraints(rebalance="daily")})
    assert missed_tests(daily, [MissedCheck(check="max_weekly_turnover", detail="x")]) is None


def test_the_offline_author_answers_missed_checks_or_says_it_cannot() -> None:
    view = TestAuthorView(
        mandate=MANDATE,
        source={},
        tests={},
        missed=[MissedCheck(check="max_weekly_turnover", detail="busiest week 0.9")],
    )
    patch = OfflineProvider().test_author(view)
    assert "+++ b/tests/strategies/test_daily_momentum_missed.py" in patch.diff
    nothing = OfflineProvider().test_author(
        view.model_copy(
            update={"missed": [MissedCheck(check="net_information_ratio", detail="-2")]}
        )
    )
    assert nothing.diff == "" and "no test for what cross-validation found missing" in nothing.notes


@pytest.mark.slow
def test_the_offline_author_never_uses_the_coders_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(ast.parse(Path(offline_author.__file__).read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert "oomrl.agent.offline_coder" not in imported and "oomrl.agent.providers" not in imported

    def coder_rule(*args: object) -> str:
        raise AssertionError("the Test Author ran the Coder's rule")

    monkeypatch.setattr("oomrl.agent.offline_coder.reference_change", coder_rule)
    monkeypatch.setattr("oomrl.agent.providers.reference_change", coder_rule)
    named = MANDATE.model_copy(
        update={"supersedes": [f"{OLD_TESTS}::{name}" for name in sorted(PINNING)]}
    )
    view = TestAuthorView(
        mandate=named, source=bundled("strategies"), tests=bundled("tests/strategies")
    )
    patch = OfflineProvider().test_author(view)
    assert f"superseded {len(PINNING)} old tests" in patch.notes
    # Rules ignore it
    assert OfflineProvider().answer_key("test_author", view) == OfflineProvider().answer_key(
        "test_author", view.model_copy(update={"feedback": [{"any": "verdict"}]})
    )


@pytest.mark.slow
def test_a_probe_run_that_hangs_is_a_named_error() -> None:
    from oomrl.errors import OomrlError

    hang = {"tests/test_slow.py": "import time\n\n\ndef test_slow():\n    time.sleep(30)\n"}
    with pytest.raises(OomrlError, match="did not finish within 0.5 s under the mandate probe"):
        pinned_tests(bundled("strategies"), hang, MANDATE, timeout_s=0.5)
