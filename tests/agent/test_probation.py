"""Probation before capital: a challenger trades a shadow book forward, the chain or a person
decides."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from oomrl.diagnostics.autopsy import Autopsy, input_json
from oomrl.errors import ProbationError
from oomrl.market import calendar
from oomrl.ops.cli import app
from oomrl.portfolio.killswitch import AccountStatus
from oomrl.portfolio.ledger import Ledger
from oomrl.repair import promotion
from oomrl.repair.probation import (
    advance_shadows,
    open_probations,
    probations,
    shadow_name,
    version_states,
)
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.agent.probation_book import OPENED, SESSIONS, chain_day, champion_trades, forward


def test_the_default_probation_is_twenty_forward_sessions_and_a_run_may_choose_its_own(
    repair_home: Path, daily_momentum_autopsy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.repair.loop import open_context

    monkeypatch.delenv("OOMRL_AGENT_PROBATION_SESSIONS")
    assert get_settings().agent.probation_sessions == 20
    settings, autopsy = get_settings(), Autopsy.model_validate(daily_momentum_autopsy)
    assert open_context(settings, autopsy).agent.probation_sessions == 20
    # --probation 0
    assert open_context(settings, autopsy, probation=0).agent.probation_sessions == 0
    assert open_context(settings, autopsy, probation=3).agent.probation_sessions == 3


@pytest.mark.slow
def test_a_challenger_not_worse_forward_takes_the_capital_after_its_probation(
    on_probation: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 500 % a year: any honest book keeps up
    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_MARGIN", "5.0")
    # settings are read once per run, as each chain run does: read them again after the change
    settings, ledger, v2 = get_settings(), on_probation["ledger"], on_probation["v2"]
    shadow = shadow_name("paper", "v2")
    assert shadow == "paper~v2"
    assert ledger.active_version("paper") == on_probation["v1"]  # the champion keeps the capital
    assert ledger.active_version(shadow) == v2.sha
    assert ledger.account(shadow).cash_fen == round(
        float(ledger.nav_frame("paper")["nav"].iloc[-1]) * 100
    )
    assert version_states(ledger, "paper") == {on_probation["v1"]: "active", v2.sha: "probation"}
    days = forward(SESSIONS)
    for day in days[:-1]:
        champion_trades(settings, ledger, day, day)
        decided, running = chain_day(settings, day)
        assert not decided and running[0].sessions_done == days.index(day) + 1
    champion_trades(settings, ledger, days[-1], days[-1])
    decided, running = chain_day(settings, days[-1])
    assert not running and [d.probation.status for d in decided] == ["promoted"]
    evidence = decided[0].evidence
    assert evidence.passed and evidence.sessions_done == SESSIONS and evidence.start == days[0]
    assert {r.version for r in evidence.rows} == {"champion", "challenger"}
    nav = float(ledger.nav_frame(shadow)["nav"].iloc[-1])
    assert (
        evidence.navs["challenger"] == nav
        and f"| NAV (CNY) | {evidence.navs['champion']:,.0f} | {nav:,.0f} |" in evidence.markdown()
    )
    assert any(c.name == "net_of_friction_vs_champion_probation" for c in evidence.checks)
    challenger = next(r for r in evidence.rows if r.version == "challenger")
    assert challenger.rebalances >= 1 and challenger.dates == days
    assert ledger.active_version("paper") == v2.sha  # the capital moved
    assert ledger.account(shadow).status is AccountStatus.CLOSED
    assert version_states(ledger, "paper")[v2.sha] == "active"
    moves = [
        json.loads(line)
        for line in (on_probation["run_dir"] / "trail.jsonl").read_text().splitlines()
    ]
    assert [(m["source"], m["target"]) for m in moves] == [("probation", "promoted")]
    advance_shadows(settings, days[-1])  # a closed shadow trades no more
    assert ledger.nav_frame(shadow)["date"].iloc[-1].date() == days[-1]


@pytest.mark.slow
def test_a_challenger_worse_forward_is_retired_with_an_autopsy_the_next_repair_admits(
    on_probation: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.repair.inputs import admit

    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_TEST", "superiority")
    # Must beat the champion by 500 % a year
    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_MARGIN", "5.0")
    settings, ledger, v2 = get_settings(), on_probation["ledger"], on_probation["v2"]
    days = forward(SESSIONS)
    for day in days:
        champion_trades(settings, ledger, day, day)
        decided, running = chain_day(settings, day)
    assert [d.probation.status for d in decided] == ["retired"]
    done = decided[0]
    assert not done.evidence.passed
    assert "superiority" in done.probation.reason
    assert ledger.active_version("paper") == on_probation["v1"]  # the champion keeps the capital
    assert version_states(ledger, "paper")[v2.sha] == "retired"
    autopsy = done.autopsy
    assert autopsy is not None
    assert autopsy.trigger.rule == "probation_retired" and autopsy.account == "paper"
    assert autopsy.trigger.window_start == days[0] and autopsy.as_of == days[-1]
    assert autopsy.diagnostics.strategy_version == v2.sha
    assert "retired after 5 forward sessions" in autopsy.diagnostics.findings[0]
    stored = [a for a in ledger.alerts("paper") if a["rule"] == "probation_retired"]
    assert [a["alert_id"] for a in stored] == [autopsy.alert_id]
    # It feeds the next repair
    assert admit(input_json(autopsy), settings).alert_id == autopsy.alert_id
    moves = [
        json.loads(line)
        for line in (on_probation["run_dir"] / "trail.jsonl").read_text().splitlines()
    ]
    assert [(m["source"], m["target"]) for m in moves] == [("probation", "retired")]


@pytest.mark.slow
def test_the_kill_switch_halts_a_shadow_book_and_retires_its_challenger_at_once(
    on_probation: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, ledger = on_probation["settings"], on_probation["ledger"]
    # A loss of 0.2 % of its capital halts the shadow book
    monkeypatch.setenv("OOMRL_KILL_THRESHOLD", "0.002")
    shadow = shadow_name("paper", "v2")
    # (the champion is not traded here: it halted long ago under this threshold)
    for day in forward(SESSIONS):
        decided, running = chain_day(get_settings(), day)
        if decided:
            break
    halts = [e for e in ledger.events(shadow) if e["kind"] == "halted"]
    assert [e["as_of"] for e in halts] == [day]  # halted on the session the chain decided it
    # Halted, then closed by the decision
    assert ledger.account(shadow).status is AccountStatus.CLOSED
    assert [d.probation.status for d in decided] == ["retired"] and not running
    kill = next(c for c in decided[0].evidence.checks if c.name == "kill_switch")
    assert not kill.passed and str(day) in kill.detail
    assert decided[0].evidence.sessions_done < SESSIONS  # decided before its probation's end
    assert ledger.active_version("paper") == on_probation["v1"]
    del settings


@pytest.mark.slow
def test_a_person_promotes_or_retires_a_challenger_early_from_the_cli(
    on_probation: dict[str, Any], tmp_path: Path
) -> None:
    settings, ledger, v2 = on_probation["settings"], on_probation["ledger"], on_probation["v2"]
    day = forward(1)[0]
    chain_day(settings, day)
    runner = CliRunner()
    listed = runner.invoke(app, ["versions", "list", "--account", "paper"])
    assert listed.exit_code == 0, listed.output
    assert [line.lstrip("* ").split()[3] for line in listed.output.splitlines()] == [
        "active",
        "probation",
    ]
    wrong = runner.invoke(app, ["versions", "promote", "v1", "--account", "paper"])
    assert (
        wrong.exit_code != 0
        and "v1 is not on probation on account 'paper' (on probation: v2)" in wrong.output
    )
    done = runner.invoke(
        app, ["versions", "promote", "v2", "--account", "paper", "--reason", "seen enough"]
    )
    assert done.exit_code == 0, done.output
    assert "v2 promoted on paper" in done.output and "1 of 5 (4 left)" in done.output
    assert "Probation of v2 on paper" in done.output
    assert ledger.active_version("paper") == v2.sha and not open_probations(ledger)
    decided = probations(ledger, "paper")[0]
    assert (
        decided.decided_by
        and "oomrl versions" in decided.decided_by
        and decided.reason == "seen enough"
    )
    again = runner.invoke(app, ["versions", "retire", "v2", "--account", "paper"])
    assert again.exit_code != 0 and "not on probation" in again.output


@pytest.mark.slow
def test_one_challenger_at_a_time_and_the_promotion_is_undone_when_the_probation_cannot_open(
    on_probation: dict[str, Any], tmp_path: Path
) -> None:
    versions = on_probation["versions"]
    candidate = versions.clone_to(tmp_path / "second", at="v1")
    (candidate / "strategies" / "note.txt").write_text("another try\n")
    with pytest.raises(ProbationError, match="already has v2 on probation"):
        promotion.promote(
            versions, candidate, "Repair again", {}, "paper", "daily_momentum", (OPENED, SESSIONS)
        )
    # The tag went with the refused commit point
    assert "v3" not in versions.git("tag", "-l").split()
    assert promotion.check(versions) == []


@pytest.mark.slow
def test_a_repaired_version_goes_on_probation_and_the_chain_promotes_it(
    repair_home: Path,
    daily_momentum_autopsy: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The forward comparison is not what is tested here
    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_MARGIN", "5.0")
    autopsy_file = tmp_path / "autopsy.json"
    autopsy_file.write_text(json.dumps(daily_momentum_autopsy))
    result = CliRunner().invoke(
        app,
        [
            "repair",
            "--autopsy",
            str(autopsy_file),
            "--provider",
            "offline",
            "--auto-approve",
            "--probation",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "repair ended On probation: v2" in result.output and "paper~v2" in result.output
    outcome = json.loads(next((repair_home / "runs").glob("repair-*/outcome.json")).read_text())
    assert outcome["status"] == "probation" and outcome["trail"][-1]["target"] == "probation"
    settings = get_settings()
    ledger = Ledger(settings.ledger_url)
    v2 = StrategyVersions(settings.store.workspace_dir, ledger).resolve("v2")
    assert ledger.active_version("paper") != v2 and ledger.active_version("paper~v2") == v2
    (probation,) = open_probations(ledger, "paper")
    assert (
        probation.opened_on == date.fromisoformat(daily_momentum_autopsy["as_of"])
        and probation.sessions == 3
    )
    days = [
        d.date()
        for d in calendar.sessions(
            pd.Timestamp(probation.opened_on) + pd.Timedelta(days=1), "2024-12-31"
        )[:3]
    ]
    for day in days:
        decided, _ = chain_day(settings, day)
    assert [d.probation.status for d in decided] == ["promoted"]
    assert ledger.active_version("paper") == v2
    trail = Path(outcome["run_dir"]) / "trail.jsonl"
    assert [json.loads(line)["target"] for line in trail.read_text().splitlines()][-2:] == [
        "probation",
        "promoted",
    ]


@pytest.mark.slow
def test_a_repair_of_an_account_whose_challenger_is_on_probation_is_refused_at_the_door(
    on_probation: dict[str, Any],
) -> None:
    from oomrl.errors import AccountOnProbationError
    from oomrl.repair.inputs import admit

    with pytest.raises(
        AccountOnProbationError,
        match=r"account 'paper' has v2 \(since 2025-11-28, 5 forward "
        r"sessions\) on probation.*oomrl versions promote\|retire v2",
    ):
        admit({"alert_id": "during-probation", "account": "paper"}, on_probation["settings"])


@pytest.mark.slow
def test_a_repair_that_waited_while_another_put_a_challenger_on_probation_stops_superseded(
    on_probation: dict[str, Any], daily_momentum_autopsy: dict[str, Any]
) -> None:
    from oomrl.repair.loop import RepairStepError, hold_account, open_context

    ctx = open_context(on_probation["settings"], Autopsy.model_validate(daily_momentum_autopsy))
    ctx.state.base = on_probation[
        "v1"
    ]  # fixed when it started, before the other repair's promotion
    with pytest.raises(RepairStepError) as stopped:
        hold_account(ctx, lambda: None)
    assert stopped.value.step == "superseded"
    assert (
        "account paper has v2 on probation since 2025-11-28, put there while this repair waited"
        in str(stopped.value)
    )
