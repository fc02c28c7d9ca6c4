"""Cross-validation checks: the mandate's constraints and the net-IR tolerance, measured from replays."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.agent.roles import Constraints
from oomrl.crossval import VersionMeasures, checks_for, measure, period_key
from oomrl.portfolio.replay import ReplayResult

WEEKLY = Constraints(rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3)


def measures(**values: object) -> VersionMeasures:
    base: dict[str, object] = {
        "version": "candidate", "sha": "c", "trading_days": 60, "rebalances": 12,
        "max_rebalances_per_period": 1, "max_adv_participation": 0.01, "max_weekly_turnover": 0.25,
        "turnover": 3.0, "costs_fraction": 0.005, "net_return": 0.02, "information_ratio": 0.1,
        "max_drawdown": -0.05}
    base.update(values)
    return VersionMeasures(**base)  # type: ignore[arg-type]


def failed(candidate: VersionMeasures, active: VersionMeasures | None = None,
           constraints: Constraints = WEEKLY, tolerance: float = 0.25) -> list[str]:
    checks = checks_for(candidate, active or measures(version="active", information_ratio=0.0),
                        constraints, tolerance)
    return [c.name for c in checks if not c.passed]


def test_a_compliant_candidate_passes_every_check() -> None:
    checks = checks_for(measures(), measures(version="active", information_ratio=0.2), WEEKLY, 0.25)
    assert [c.name for c in checks] == ["rebalance", "max_adv_participation", "max_weekly_turnover",
                                        "net_information_ratio"]
    assert all(c.passed for c in checks)


@pytest.mark.parametrize(("change", "rule"), [
    ({"max_rebalances_per_period": 2}, "rebalance"),
    ({"max_adv_participation": 0.06}, "max_adv_participation"),
    ({"max_weekly_turnover": 0.32}, "max_weekly_turnover"),
    ({"information_ratio": -0.3}, "net_information_ratio"),
    ({"information_ratio": None}, "net_information_ratio"),
])
def test_each_breach_fails_its_own_check(change: dict[str, object], rule: str) -> None:
    assert failed(measures(**change)) == [rule]


def test_fill_noise_within_the_slack_is_not_a_breach() -> None:
    assert failed(measures(max_adv_participation=0.054, max_weekly_turnover=0.314)) == []


def test_optional_constraints_are_checked_when_given() -> None:
    strict = Constraints.model_validate({**WEEKLY.model_dump(), "max_drawdown": 0.04,
                                         "min_information_ratio": 0.5})
    assert failed(measures(), constraints=strict) == ["max_drawdown", "min_information_ratio"]
    daily = Constraints(rebalance="daily")
    assert failed(measures(max_rebalances_per_period=5), constraints=daily) == []


def test_an_active_version_without_ir_is_no_bar() -> None:
    check = checks_for(measures(information_ratio=None), measures(version="active", information_ratio=None),
                       Constraints(), 0.25)
    assert [(c.name, c.passed) for c in check] == [("net_information_ratio", True)]


def test_period_keys() -> None:
    monday, friday, next_monday = (pd.Timestamp(d) for d in ("2024-07-01", "2024-07-05", "2024-07-08"))
    assert period_key(monday, "weekly") == period_key(friday, "weekly") != period_key(next_monday, "weekly")
    assert period_key(monday, "biweekly") == period_key(next_monday, "biweekly")
    assert period_key(monday, "monthly") == (2024, 7)
    assert period_key(monday, "daily") == monday


def test_measure_reads_turnover_participation_and_schedule_from_a_replay() -> None:
    dates = pd.bdate_range("2024-07-01", periods=10)
    turnover = np.array([0.2, 0.1, 0, 0, 0, 0.3, 0, 0, 0, 0])
    nav = pd.DataFrame({"date": dates, "nav": 1e7, "turnover": turnover, "costs": 100.0,
                        "realized_return": np.linspace(-0.01, 0.01, 10), "slippage_leakage": 0.0,
                        "frictionless_return": 0.0})
    fills = pd.DataFrame({"date": dates[:2], "adv_participation": [0.01, 0.03]})
    result = ReplayResult("s", nav, fills, pd.DataFrame(), 1e7)
    bench = pd.Series(np.linspace(0.0, 0.002, 30), index=pd.bdate_range("2024-06-20", periods=30))
    row = measure(result, "candidate", "abc", bench, "weekly")
    assert row.rebalances == 3 and row.max_rebalances_per_period == 2
    assert row.max_weekly_turnover == pytest.approx(0.3)
    assert row.max_adv_participation == pytest.approx(0.03)
    assert row.turnover == pytest.approx(0.6) and row.information_ratio is not None
    assert row.trading_days == 10 and row.halted_on is None
    empty = measure(ReplayResult("s", nav.assign(turnover=0.0), pd.DataFrame(), pd.DataFrame(), 1e7),
                    "active", "x", bench, "weekly")
    assert (empty.rebalances, empty.max_rebalances_per_period, empty.max_adv_participation) == (0, 0, 0.0)


def test_cross_validate_replays_both_versions_even_from_an_older_workspace(
        repair_home: Path, tmp_path: Path) -> None:
    from oomrl.config import get_settings
    from oomrl.crossval import cross_validate, window_for
    from oomrl.data.sample import ensure_sample
    from oomrl.versions import repo_root

    old = tmp_path / "old"
    shutil.copytree(repo_root() / "strategies", old / "strategies")
    base = old / "strategies" / "base.py"
    signature = "portfolio_value: float = 1.0, members: Iterable[str] | None = None) -> None:"
    assert signature in base.read_text()
    base.write_text(base.read_text().replace(  # a MarketView from before point-in-time membership
        signature, "portfolio_value: float = 1.0) -> None:\n        members = None"))
    store = ensure_sample(get_settings())
    start, end = window_for(store, date(2024, 7, 15), 20)
    result = cross_validate(repo_root(), old, "weekly_liquidity", WEEKLY, store, start, end)
    assert [row.version for row in result.rows] == ["active", "candidate"]
    assert all(row.trading_days == 20 for row in result.rows)
    assert result.rows[1].max_rebalances_per_period == 1 and result.passed
