"""`oomrl repair` with the offline provider, end to end with the real gate, replay and ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oomrl.market.rules import AShareRules
from oomrl.ops.cli import app
from oomrl.portfolio.hosting import WorkspaceStrategy
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.market import MarketFrames
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import get_settings
from tests.portfolio.factories import random_panels

KILL_THRESHOLD = "0.10"  # 10 % of principal lost halts


def trades_the_next_day(root: Path) -> bool:
    """Does the daily_momentum of the version at `root`, run in its host, trade on 2024-07-02 after
    07-01?"""
    market = MarketFrames.build(
        random_panels(["600000.SH"], days=3, start="2024-07-01"), AShareRules()
    )
    runner = WorkspaceStrategy(root, "daily_momentum").open(None, market)
    try:
        return runner.due(1, market.days[0])
    finally:
        runner.close()


@pytest.mark.slow
def test_offline_repair_promotes_a_tested_weekly_capped_version(
    repair_home: Path, daily_momentum_autopsy: dict[str, Any], tmp_path: Path
) -> None:
    autopsy_file = tmp_path / "autopsy.json"
    autopsy_file.write_text(json.dumps(daily_momentum_autopsy))
    runner = CliRunner()
    result = runner.invoke(
        app, ["repair", "--autopsy", str(autopsy_file), "--provider", "offline", "--auto-approve"]
    )
    assert result.exit_code == 0, result.output
    assert "repair ended Promoted: promoted v2" in result.output
    outcome = json.loads(next((repair_home / "runs").glob("repair-*/outcome.json")).read_text())
    assert [(m["source"], m["target"]) for m in outcome["trail"]] == [
        ("critic", "approval"),
        ("approval", "test-genesis"),
        ("test-genesis", "logic-genesis"),
        ("logic-genesis", "cross-validation"),
        ("cross-validation", "promotion"),
        ("promotion", "promoted"),
    ]
    assert [i["role"] for i in outcome["inputs"]] == ["critic", "test_author", "coder"]

    settings = get_settings()
    versions = StrategyVersions(settings.store.workspace_dir, Ledger(settings.ledger_url))
    v2 = versions.resolve("v2")
    assert versions.ledger.active_version("paper") == v2 == versions.head()
    # Tests first: one commit touching only tests (red), then one touching only the strategy.
    assert versions.git("log", "-1", "--format=%s", "v2~1").startswith("Tests for mandate")
    assert set(versions.git("diff", "--name-only", "v1", "v2~1").split()) == {
        "tests/strategies/test_daily_momentum.py",
        "tests/strategies/test_daily_momentum_mandate.py",
    }
    assert versions.git("diff", "--name-only", "v2~1", "v2").split() == [
        "strategies/daily_momentum.py"
    ]

    meta = versions.metadata("v2")
    assert meta["autopsy"]["alert_id"] == daily_momentum_autopsy["alert_id"]
    assert len(meta["transcript_sha256"]) == 64 and meta["provider"] == "offline"
    test_gen, code_patch = meta["verdicts"]
    assert (
        test_gen["phase"] == "test-gen" and test_gen["accepted"] and test_gen["tests"]["failed"] > 0
    )
    assert code_patch["phase"] == "code-patch" and code_patch["accepted"]
    assert code_patch["tests"]["failed"] == 0 and code_patch["coverage"]["percent"] >= 95
    assert [d["phase"] for d in meta["diffs"]] == ["test-gen", "code-patch"]

    rows = {row["version"]: row for row in meta["cross_validation"]["rows"]}
    candidate, active = rows["candidate"], rows["active"]
    assert candidate["max_rebalances_per_period"] == 1
    assert candidate["max_weekly_turnover"] <= 0.3 * 1.05
    assert candidate["max_adv_participation"] <= 0.05
    assert candidate["costs_fraction"] < active["costs_fraction"] / 5
    assert candidate["turnover"] < active["turnover"] / 5
    assert all(check["passed"] for check in meta["cross_validation"]["checks"])

    # The rebalance loads exactly the active commit: weekly now, the old version stays daily.
    assert not trades_the_next_day(versions.materialize(v2))
    assert trades_the_next_day(versions.materialize("v1"))

    listing = runner.invoke(app, ["versions", "list"])
    assert listing.exit_code == 0 and "* v2" in listing.output
    shown = json.loads(runner.invoke(app, ["versions", "show", "v2"]).output)
    assert shown["metadata"]["mandate"]["constraints"]["max_weekly_turnover"] == 0.3
    back = runner.invoke(app, ["versions", "rollback"])
    assert back.exit_code == 0 and versions.resolve("v1") in back.output
    assert versions.ledger.active_version("paper") == versions.resolve("v1")
    again = runner.invoke(app, ["versions", "activate", "v2"])
    assert again.exit_code == 0 and versions.ledger.active_version("paper") == v2


@pytest.mark.slow
def test_a_loss_of_a_version_the_kill_switch_halted_is_repaired_on_evidence_that_counts_the_halt(
    repair_home: Path,
    daily_momentum_autopsy: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kill switch trips at a principal loss the churning daily_momentum reaches in the long
    # window and the weekly, capped repair does not: cross-validation measures the halted active
    # version.
    monkeypatch.setenv("OOMRL_KILL_THRESHOLD", KILL_THRESHOLD)
    autopsy_file = tmp_path / "autopsy.json"
    autopsy_file.write_text(json.dumps(daily_momentum_autopsy))
    result = CliRunner().invoke(
        app, ["repair", "--autopsy", str(autopsy_file), "--provider", "offline", "--auto-approve"]
    )
    outcome = json.loads(next((repair_home / "runs").glob("repair-*/outcome.json")).read_text())
    rows = {(row["version"], row["window"]): row for row in outcome["cross_validation"]["rows"]}
    assert result.exit_code == 0, result.output
    assert "repair ended Promoted: promoted v2" in result.output
    halted = rows[("active", "long")]["halted_on"]
    assert halted is not None and rows[("candidate", "long")]["halted_on"] is None
    long_days = rows[("candidate", "long")]["trading_days"]
    # Measured over every session, halt or not
    assert rows[("active", "long")]["trading_days"] == long_days
    after = [
        r
        for d, r in zip(
            rows[("active", "long")]["dates"], rows[("active", "long")]["returns"], strict=True
        )
        if d > halted
    ]
    assert after and set(after) == {0.0}  # its capital was lost: 0 after the halt
    checks = {check["name"]: check for check in outcome["cross_validation"]["checks"]}
    assert (
        f"active halted by the kill switch on {halted}"
        in checks["net_of_friction_vs_active_long"]["detail"]
    )
    assert all(check["passed"] for check in checks.values())
