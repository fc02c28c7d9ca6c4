"""`oomrl demo`: the interim data stage, the weekly loop (alerts, repair policy, cool-down, kill
switch, fail-closed rebalances), Table 1 and the report files — on the real bundled sample."""

from __future__ import annotations

import json
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.errors import OomrlError
from oomrl.ops.cli import app
from oomrl.ops.demo import DemoConfig, DemoRepair, pick_alert, run_demo, weeks_between
from oomrl.repair import promotion
from oomrl.settings import OomrlSettings


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo home for the module: the sample is ingested once, each run resets ledger and
    workspace."""
    return tmp_path_factory.mktemp("demo") / "home"


def quiet() -> Console:
    return Console(width=160, record=True, force_terminal=False)


class RecordingRepairer:
    """Stands in for the 60-second STDAW repair (the e2e suite runs the real one through
    Prefect)."""

    def __init__(self, status: str = "promoted") -> None:
        self.status = status
        self.autopsies: list[Autopsy] = []

    def __call__(self, settings: OomrlSettings, config: DemoConfig, autopsy: Autopsy) -> DemoRepair:
        self.autopsies.append(autopsy)
        return DemoRepair(
            alert_id=autopsy.alert_id,
            as_of=autopsy.as_of.isoformat(),
            status=self.status,
            reason="recorded",
            run_dir=str(settings.store.runs_dir),
        )


class ProbationRepairer:
    """A real promotion with a real probation in place of the STDAW repair: v1 made weekly,
    committed, tagged and put on probation for the demo's `probation_sessions` (what a passing
    repair does)."""

    def __init__(self) -> None:
        self.autopsies: list[Autopsy] = []

    def __call__(self, settings: OomrlSettings, config: DemoConfig, autopsy: Autopsy) -> DemoRepair:
        from oomrl.portfolio.service import open_ledger
        from oomrl.repair.versions import StrategyVersions

        self.autopsies.append(autopsy)
        versions = StrategyVersions(settings.store.workspace_dir, open_ledger(settings))
        # The promotion keeps the commit, not the clone
        with tempfile.TemporaryDirectory() as scratch:
            candidate = versions.clone_to(Path(scratch) / "candidate", at="v1")
            source = candidate / "strategies" / f"{config.strategy}.py"
            daily = "return last_rebalance is None or day > last_rebalance"
            weekly = (
                "return last_rebalance is None or day.isocalendar()[:2] != "
                "last_rebalance.isocalendar()[:2]"
            )
            assert daily in source.read_text()
            source.write_text(source.read_text().replace(daily, weekly))
            info = promotion.promote(
                versions,
                candidate,
                "Repair daily_momentum: weekly",
                {"mandate": {"constraints": {"rebalance": "weekly"}}},
                config.account,
                config.strategy,
                (autopsy.as_of, config.probation_sessions),
            )
        return DemoRepair(
            alert_id=autopsy.alert_id,
            as_of=autopsy.as_of.isoformat(),
            status="probation",
            reason=f"{info.tag} on probation",
            run_dir=str(settings.store.runs_dir),
            version=info.tag,
        )


@pytest.mark.slow
def test_a_repaired_version_trades_its_probation_forward_and_the_chain_promotes_it(
    demo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.market import calendar
    from oomrl.metrics.attribution import account_marks, account_returns, version_labels
    from oomrl.portfolio.ledger import Ledger
    from oomrl.repair.versions import StrategyVersions

    # 500 % a year: the challenger keeps up
    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_MARGIN", "5.0")
    console, repairer = quiet(), ProbationRepairer()
    summary = run_demo(
        home=demo_home,
        start="2024-07-01",
        end="2024-08-09",
        console=console,
        max_repairs=2,
        repairer=repairer,
        probation=8,
        repair_on="warning",
    )
    opened = repairer.autopsies[0].as_of  # the turnover alert of 2024-07-05
    forward = [
        d.date()
        for d in calendar.sessions(pd.Timestamp(opened) + pd.Timedelta(days=1), "2024-08-09")
    ]
    (probation,) = summary.probations
    assert (
        probation["version"] == "v2"
        and probation["account"] == "demo"
        and probation["sessions"] == 8
    )
    assert probation["started"] == str(opened) and probation["decided"] == str(forward[7])
    assert probation["decision"] == "promoted" and probation["decided_by"] == "the daily chain"
    evidence = probation["evidence"]
    assert evidence["sessions"] == 8 and evidence["start"] == str(forward[0])
    assert {row["version"] for row in evidence["rows"]} == {"champion", "challenger"}
    assert all(check["passed"] for check in evidence["checks"]) and evidence["checks"]
    text = " ".join(console.export_text().split())
    assert f"probation promoted v2 on {forward[7]} after 8 forward sessions" in text
    # No second challenger meanwhile
    assert "repair deferred" in text and "v2 is on probation since" in text
    assert (
        f"probation: v2 on demo~v2 from {opened}, promoted on {forward[7]} by the daily chain"
        in text
    )
    assert len(repairer.autopsies) == 1
    # The capital moved at the decision: v1 holds the book until v2 (weekly) first trades, the next
    # week.
    ledger = Ledger(f"sqlite:///{demo_home / 'ledger.db'}")
    (v1, v2) = summary.table1[:2]
    first_v2 = next(
        d for d in forward if d > forward[7] and d.isocalendar()[1] != forward[7].isocalendar()[1]
    )
    assert (v1["version"], v1["end"]) == (
        "v1 daily_momentum",
        str(forward[forward.index(first_v2) - 1]),
    )
    assert (v2["version"], v2["start"]) == ("v2 daily_momentum", str(first_v2))
    shadow = ledger.nav_frame("demo~v2")
    assert [d.date() for d in shadow["date"]] == forward[
        :8
    ]  # the shadow book, marked every session
    # The tearsheet marks the probation's start and its decision (and v2's first session).
    returns, versions = account_returns(ledger.nav_frame("demo"), "demo")
    marks = account_marks(
        ledger,
        "demo",
        versions,
        version_labels(ledger, "demo", StrategyVersions(demo_home / "workspace")),
        None,
    )
    shown = {
        (m.kind, m.date.date(), m.label)
        for m in marks
        if m.kind in ("probation", "decision", "promotion")
    }
    assert shown == {
        ("probation", opened, "v2 on probation"),
        ("decision", forward[7], "v2 promoted"),
        ("promotion", first_v2, "v2 daily_momentum"),
    }
    written = Path(summary.summary_md).read_text()
    assert f"| {opened} | probation |" in written and f"| {forward[7]} | decision |" in written


@pytest.mark.slow
def test_a_challenger_worse_forward_is_retired_and_the_champion_keeps_trading(
    demo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.portfolio.ledger import Ledger

    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_TEST", "superiority")
    # Must beat the champion by 5000 % a year
    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_MARGIN", "50.0")
    console = quiet()
    summary = run_demo(
        home=demo_home,
        start="2024-07-01",
        end="2024-07-26",
        console=console,
        max_repairs=1,
        repairer=ProbationRepairer(),
        probation=3,
    )
    (probation,) = summary.probations
    assert (probation["started"], probation["decided"], probation["decision"]) == (
        "2024-07-12",
        "2024-07-17",
        "retired",
    )
    assert "net_of_friction_vs_champion_probation" in probation["reason"]
    assert "probation retired v2 on 2024-07-17 after 3 forward sessions" in " ".join(
        console.export_text().split()
    )
    assert [row["version"] for row in summary.table1] == ["v1 daily_momentum", "whole window"]
    ledger = Ledger(f"sqlite:///{demo_home / 'ledger.db'}")
    assert "probation_retired" in {
        alert["rule"] for alert in ledger.alerts("demo")
    }  # for the next repair
    assert ledger.account("demo~v2").status.value == "closed"


@pytest.mark.slow
def test_cli_demo_without_repairs_ingests_and_reports(demo_home: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "demo",
            "--home",
            str(demo_home),
            "--start",
            "2024-07-01",
            "--end",
            "2024-08-09",
            "--max-repairs",
            "0",
        ],
        env={"COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert (
        "daily bars" in result.output
        and "501,155" in result.output
        and "CSI 300 (000300)" in result.output
    )
    assert "Table 1" in result.output and "v1 daily_momentum" in result.output
    tearsheet = Path(result.output.split("tearsheet:")[1].split()[0])
    assert tearsheet.exists() and tearsheet.name == "tearsheet.html"
    summary = json.loads((tearsheet.parent / "demo.json").read_text())
    assert (
        summary["repairs"] == [] and summary["halted_on"] is None and summary["jails"] == ["bwrap"]
    )
    assert {a["rule"] for a in summary["alerts"]} >= {"execution_decay"}
    (row_v1, whole) = summary["table1"]
    assert row_v1["trading_days"] == whole["trading_days"] == 30
    # daily momentum bleeds under friction in this window: that is the loss the demo repairs
    assert (
        row_v1["end"] == "2024-08-09"
        and whole["cumulative_return"] < 0
        and whole["max_drawdown"] < -0.1
    )
    assert whole["beta"] > 0
    # 30 sessions are too short to annualize: Table 1 leaves those figures out, and says so
    assert whole["annualized_return"] is whole["sharpe"] is whole["information_ratio"] is None
    assert "traded fewer than 60 sessions, too short to annualize" in " ".join(
        result.output.split()
    )
    assert_point_in_time_members_only(demo_home)
    # it says why no repair ran, and how to look at what it left
    assert "no more repairs: --max-repairs 0 reached" in " ".join(result.output.split())
    inspect = f"OOMRL_HOME={demo_home.resolve()} oomrl versions list --account demo"
    assert inspect in result.output
    listed = CliRunner().invoke(
        app, ["versions", "list", "--account", "demo"], env={"OOMRL_HOME": str(demo_home.resolve())}
    )
    assert listed.exit_code == 0 and listed.output.startswith("* v1 "), listed.output


def assert_point_in_time_members_only(home: Path) -> None:
    """Every buy in the demo's ledger is of a CSI 300 member on its decision date (the session
    before)."""
    from oomrl.data.sources.sample import SampleSource
    from oomrl.market import calendar
    from oomrl.market.universe import members_on
    from oomrl.portfolio.ledger import Ledger

    fills = Ledger(f"sqlite:///{home / 'ledger.db'}").fills_frame("demo")
    buys = fills[fills["side"] == "buy"]
    assert len(buys) > 50
    membership = SampleSource().membership()
    sessions = calendar.sessions("2024-06-01", "2026-03-31")
    for day, symbols in buys.groupby(pd.to_datetime(buys["date"]))["symbol"]:
        decided = sessions[sessions.searchsorted(day) - 1]
        outside = set(symbols) - set(members_on(membership, decided))
        assert not outside, f"{day:%Y-%m-%d}: bought non-members {sorted(outside)}"


@pytest.mark.slow
def test_friction_alert_starts_repair_and_cooldown_spaces_the_next(demo_home: Path) -> None:
    repairer = RecordingRepairer()
    summary = run_demo(
        home=demo_home,
        start="2024-07-01",
        end="2024-10-31",
        console=quiet(),
        max_repairs=2,
        repairer=repairer,
    )
    first, second = (a.as_of for a in repairer.autopsies)
    assert repairer.autopsies[0].trigger.rule == "execution_decay"
    assert (second - first).days >= 4 * 7 - 4  # four weeks of cool-down after a promotion
    assert [r.status for r in summary.repairs] == ["promoted", "promoted"]


@pytest.mark.slow
def test_critical_policy_waits_for_a_critical_alert(demo_home: Path) -> None:
    repairer = RecordingRepairer(status="failed")
    run_demo(
        home=demo_home,
        start="2024-07-01",
        end="2024-08-16",
        console=quiet(),
        repair_on="critical",
        max_repairs=1,
        repairer=repairer,
    )
    assert [a.severity for a in repairer.autopsies] == ["critical"]


@pytest.mark.slow
def test_kill_switch_stops_the_replay(demo_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_KILL_THRESHOLD", "0.05")
    console = quiet()
    summary = run_demo(
        home=demo_home,
        start="2024-07-01",
        end="2024-12-31",
        console=console,
        max_repairs=0,
        repairer=RecordingRepairer(),
    )
    assert summary.halted_on is not None and summary.halted_on < "2024-12-31"
    assert "the kill switch wins" in console.export_text()


@pytest.mark.slow
def test_invalid_decisions_are_refused_not_traded(
    demo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import oomrl.portfolio.rebalance as rebalance_module

    real = rebalance_module.rebalance

    def refuse_in_july(ledger: Any, account: str, as_of: date, *args: Any, **kwargs: Any) -> Any:
        if date(2024, 7, 8) <= as_of <= date(2024, 7, 10):
            raise OomrlError("weights sum to 1.01 > 1 (long-only, no leverage)")
        return real(ledger, account, as_of, *args, **kwargs)

    monkeypatch.setattr(rebalance_module, "rebalance", refuse_in_july)
    from oomrl.portfolio.hosting import WorkspaceStrategy

    opened: list[Path] = []
    real_open = WorkspaceStrategy.open
    monkeypatch.setattr(
        WorkspaceStrategy,
        "open",
        lambda self, *a, **k: opened.append(self.root) or real_open(self, *a, **k),
    )
    console = quiet()
    summary = run_demo(
        home=demo_home,
        start="2024-07-01",
        end="2024-07-19",
        console=console,
        max_repairs=0,
        repairer=RecordingRepairer(),
    )
    assert len(opened) == 1  # one strategy host served v1's three weeks of rebalances
    assert [r.date for r in summary.refused] == ["2024-07-08", "2024-07-09", "2024-07-10"]
    text = console.export_text()
    assert text.count("rebalance refused") == 1 and "3 rebalance(s) refused" in text
    # The refused days are marked by the next rebalance
    assert summary.table1[-1]["trading_days"] == 15


@pytest.mark.slow
def test_a_demo_without_a_jail_says_its_strategy_code_ran_unjailed(tmp_path: Path) -> None:
    import os
    import shutil

    from oomrl.portfolio.hosting import UNSAFE_JAIL
    from tests.cli.test_no_jail import without_bwrap

    if os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("unshare") is None:
        pytest.skip("hiding bubblewrap needs root, unshare and an installed bwrap")
    done = without_bwrap(
        tmp_path / "base",
        "demo",
        "--home",
        str(tmp_path / "home"),
        "--start",
        "2024-07-01",
        "--end",
        "2024-07-12",
        "--max-repairs",
        "0",
        unsafe=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "strategy code ran unjailed" in done.stdout
    summary = json.loads(
        next((tmp_path / "home" / "runs").glob("report-demo-*/demo.json")).read_text()
    )
    assert summary["jails"] == [UNSAFE_JAIL]


def test_the_active_version_keeps_its_runner_until_another_version_trades() -> None:
    from oomrl.market.rules import AShareRules
    from oomrl.ops.demo import ActiveVersion
    from oomrl.portfolio.market import MarketFrames
    from oomrl.portfolio.setup import RebalanceSetup
    from tests.portfolio.factories import random_panels
    from tests.portfolio.inprocess import InProcessStrategy

    market = MarketFrames.build(random_panels(["600000.SH", "600036.SH"], days=30), AShareRules())
    setup = RebalanceSetup(InProcessStrategy.bundled("daily_momentum"), {}, "v1", AShareRules())
    with ActiveVersion() as trading:
        first = trading.runner("sha-1", setup, market)
        assert trading.runner("sha-1", setup, market) is first
        second = trading.runner("sha-2", setup, market)
        assert second is not first and trading.version == "sha-2"
    assert trading.open is None


def test_pick_alert_policies() -> None:
    from types import SimpleNamespace as NS

    friction = NS(severity="warning", trigger=NS(rule="execution_decay"))
    drawdown = NS(severity="warning", trigger=NS(rule="drawdown"))
    critical = NS(severity="critical", trigger=NS(rule="drawdown"))
    assert pick_alert([drawdown, friction], "friction") is friction
    assert pick_alert([drawdown], "friction") is None
    assert pick_alert([friction, critical], "friction") is critical
    assert pick_alert([drawdown, friction], "critical") is None
    assert pick_alert([drawdown], "warning") is drawdown


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repair_on": "sometimes"}, "--repair-on"),
        ({"start": "2025-01-01", "end": "2024-01-01"}, "before"),
    ],
)
def test_bad_arguments_are_named(demo_home: Path, kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(OomrlError, match=message):
        run_demo(home=demo_home, console=quiet(), **kwargs)  # type: ignore[arg-type]


def test_weeks_between_groups_sessions() -> None:
    weeks = weeks_between(date(2024, 9, 30), date(2024, 10, 11))  # National Day holiday week
    assert [len(week) for week in weeks] == [1, 4]  # 30 Sep; then 8-11 Oct
    with pytest.raises(OomrlError, match="no XSHG sessions"):
        weeks_between(date(2024, 10, 1), date(2024, 10, 7))
