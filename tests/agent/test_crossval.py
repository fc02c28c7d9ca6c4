"""Promotion evidence: every mandate constraint, a configurable promotion rule net of friction in
two windows, baseline B alongside, halted versions counted, and the decision table in the run
folder."""

from __future__ import annotations

import re
import shutil
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.diagnostics.mandate import Constraints
from oomrl.errors import MetricsInputError
from oomrl.portfolio.replay import ReplayResult
from oomrl.repair.crossval import (
    CrossValidation,
    PromotionRule,
    VersionMeasures,
    after_halt,
    baseline_of,
    checks_for,
    measure,
    not_worse,
    period_key,
)

WEEKLY = Constraints(rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3)
DAYS = [date(2024, 1, 2) + timedelta(days=i) for i in range(120)]


def measures(
    version: str = "candidate",
    window: str = "long",
    drift: float = 0.0,
    seed: int = 0,
    **values: object,
) -> VersionMeasures:
    rng = np.random.default_rng(seed)
    base: dict[str, object] = {
        "version": version,
        "sha": f"{version}-sha",
        "trading_days": len(DAYS),
        "rebalances": 12,
        "max_rebalances_per_period": 1,
        "max_adv_participation": 0.01,
        "max_weekly_turnover": 0.25,
        "turnover": 3.0,
        "costs_fraction": 0.005,
        "net_return": 0.02,
        "information_ratio": 0.1,
        "max_drawdown": -0.05,
        "window": window,
        "max_position_weight": 0.04,
        "dates": DAYS,
        "returns": list(rng.normal(0.0005 + drift, 0.01, len(DAYS))),
    }
    base.update(values)
    return VersionMeasures(**base)  # type: ignore[arg-type]


def rows(candidate_drift: float = 0.0, **candidate: object) -> list[VersionMeasures]:
    """Active and candidate in both windows; the candidate shares the active's noise plus
    `candidate_drift`."""
    out = []
    for window in ("alert", "long"):
        active = measures("active", window)
        mine = measures("candidate", window, **candidate)
        noise = np.random.default_rng(1).normal(0, 0.002, len(DAYS))
        # Paired noise around 0: the candidate earns what the active does, on average
        noise -= noise.mean()
        mine.returns = [x + candidate_drift + e for x, e in zip(active.returns, noise, strict=True)]
        out += [active, mine]
    return out


def failed(found: list, prefix: str = "") -> list[str]:
    return [c.name for c in found if not c.passed and c.name.startswith(prefix)]


def test_a_compliant_candidate_passes_every_check() -> None:
    checks = checks_for(rows(), WEEKLY)
    assert [c.name for c in checks] == [
        "rebalance",
        "max_adv_participation",
        "max_weekly_turnover",
        "net_of_friction_vs_active_alert",
        "net_of_friction_vs_active_long",
    ]
    assert all(c.passed for c in checks)


def test_a_candidate_worse_net_of_friction_is_refused_with_the_numbers() -> None:
    # 0.1 % a day worse (25 % a year) against a paired noise of 0.2 % a day: far beyond one standard
    # error.
    checks = checks_for(rows(candidate_drift=-0.001), WEEKLY)
    refused = [c for c in checks if not c.passed]
    assert [c.name for c in refused] == [
        "net_of_friction_vs_active_alert",
        "net_of_friction_vs_active_long",
    ]
    found = rows(candidate_drift=-0.001)
    # Alert window: candidate - active
    diff = np.array(found[1].returns) - np.array(found[0].returns)
    mean, error = diff.mean() * 252, diff.std(ddof=1) * 252 / np.sqrt(len(diff))
    detail = refused[0].detail
    assert f"{mean:+.2%} a year" in detail and f"standard error {error:.2%}" in detail
    assert "rule non-inferiority: mean - 0 SE >= -0.00% a year" in detail and mean < 0
    assert f"sessions {DAYS[0]}..{DAYS[-1]}" in detail  # the window's dates are named


@pytest.mark.parametrize(
    ("rule", "shortfalls"),
    [
        # The default: non-inferiority at margin 0 on the mean: any measured shortfall is refused.
        (PromotionRule(), {-0.5: False, 0.5: True}),
        # Non-inferiority with a stated margin of 2 SE at one SE: trailing by 0.5 SE passes, by 1.5
        # SE fails.
        ("margin-2se", {0.5: True, -0.5: True, -1.5: False}),
        # Superiority at one SE: leading by 0.5 SE is not enough, by 1.5 SE is.
        (PromotionRule(test="superiority", z=1.0), {0.5: False, 1.5: True, -0.5: False}),
    ],
)
def test_the_promotion_rule_is_configurable_and_its_boundary_sits_where_it_says(
    rule: PromotionRule | str, shortfalls: dict[float, bool]
) -> None:
    base = rows()
    noise = np.array(base[1].returns) - np.array(base[0].returns)
    se_daily = noise.std(ddof=1) / np.sqrt(len(noise))
    if rule == "margin-2se":
        rule = PromotionRule(margin=2 * se_daily * 252, z=1.0)
    assert isinstance(rule, PromotionRule)
    for multiple, passes in shortfalls.items():
        drift = -noise.mean() + multiple * se_daily
        check = checks_for(rows(candidate_drift=drift), WEEKLY, rule)[3]
        assert check.name == "net_of_friction_vs_active_alert" and check.passed is passes, (
            multiple,
            check.detail,
        )
        assert rule.describe() in check.detail


def test_a_candidate_breaking_max_position_weight_is_refused() -> None:
    capped = Constraints.model_validate({**WEEKLY.model_dump(), "max_position_weight": 0.05})
    assert failed(checks_for(rows(max_position_weight=0.08), capped)) == ["max_position_weight"]
    assert failed(checks_for(rows(max_position_weight=0.051), capped)) == []  # lot rounding slack
    detail = next(
        c.detail
        for c in checks_for(rows(max_position_weight=0.08), capped)
        if c.name == "max_position_weight"
    )
    assert "0.0800" in detail and "limit 0.05" in detail


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"max_rebalances_per_period": 2}, "rebalance"),
        ({"max_adv_participation": 0.06}, "max_adv_participation"),
        ({"max_weekly_turnover": 0.32}, "max_weekly_turnover"),
        ({"halted_on": date(2024, 3, 1)}, "kill_switch"),
    ],
)
def test_each_breach_fails_its_own_check(change: dict[str, object], rule: str) -> None:
    assert failed(checks_for(rows(**change), WEEKLY)) == [rule]


def test_optional_constraints_are_checked_when_given() -> None:
    strict = Constraints.model_validate(
        {**WEEKLY.model_dump(), "max_drawdown": 0.04, "min_information_ratio": 0.5}
    )
    assert failed(checks_for(rows(), strict)) == ["max_drawdown", "min_information_ratio"]
    daily = Constraints(rebalance="daily")
    assert failed(checks_for(rows(max_rebalances_per_period=5), daily)) == []


def test_baseline_b_is_compared_in_both_windows() -> None:
    found = rows()
    for active in found[
        0::2
    ]:  # B earns the active's returns plus 0.2 % a day: the candidate trails it
        found.append(
            active.model_copy(
                update={
                    "version": "baseline",
                    "sha": "b",
                    "returns": [x + 0.002 for x in active.returns],
                }
            )
        )
    assert failed(checks_for(found, WEEKLY)) == [
        "net_of_friction_vs_baseline_alert",
        "net_of_friction_vs_baseline_long",
    ]


def test_no_common_sessions_is_no_comparison() -> None:
    lonely = measures("candidate", dates=DAYS[:1], returns=[0.0])
    assert not_worse(lonely, measures("active")).passed


def test_the_decision_table_prints_measures_checks_and_verdict(tmp_path: Path) -> None:
    found = rows(candidate_drift=-0.001)
    cross = CrossValidation(
        start=DAYS[60],
        end=DAYS[-1],
        rows=found,
        checks=checks_for(found, WEEKLY),
        long_start=DAYS[0],
        ranking=["active", "candidate"],
    )
    text = cross.write(tmp_path).read_text()
    assert text.startswith("# Cross-validation: REFUSE")
    # versions × windows as columns, each window named: two "active" columns never look alike
    assert "| window | measure | candidate | active |" in text
    assert (
        f"| alert | from | {DAYS[0]} | {DAYS[0]} |" in text
        and "| long | sessions | 120 | 120 |" in text
    )
    assert "- **net_of_friction_vs_active_long**: FAILED — candidate - active" in text
    assert "ranking by total reward" in text
    assert not re.search(r"\d\.\d{6,}", text)  # every number rounded
    assert all("dates" not in row for row in cross.table())


def test_period_keys() -> None:
    monday, friday, next_monday = (
        pd.Timestamp(d) for d in ("2024-07-01", "2024-07-05", "2024-07-08")
    )
    assert (
        period_key(monday, "weekly")
        == period_key(friday, "weekly")
        != period_key(next_monday, "weekly")
    )
    assert period_key(monday, "biweekly") == period_key(next_monday, "biweekly")
    assert period_key(monday, "monthly") == (2024, 7)
    assert period_key(monday, "daily") == monday


def test_measure_reads_turnover_participation_weights_reward_and_schedule_from_a_replay() -> None:
    dates = pd.bdate_range("2024-07-01", periods=10)
    turnover = np.array([0.2, 0.1, 0, 0, 0, 0.3, 0, 0, 0, 0])
    nav = pd.DataFrame(
        {
            "date": dates,
            "nav": 1e7,
            "turnover": turnover,
            "costs": 100.0,
            "realized_return": np.linspace(-0.01, 0.01, 10),
            "slippage_leakage": 0.0,
            "frictionless_return": 0.0,
            "reward": 0.001,
        }
    )
    fills = pd.DataFrame({"date": dates[:2], "adv_participation": [0.01, 0.03]})
    result = ReplayResult(
        "s",
        nav,
        fills,
        pd.DataFrame(),
        1e7,
        max_weight=pd.Series([0.05, 0.09], index=dates[[0, 5]]),
    )
    bench = pd.Series(np.linspace(0.0, 0.002, 30), index=pd.bdate_range("2024-06-20", periods=30))
    row = measure(result, "candidate", "abc", bench, "weekly")
    assert row.rebalances == 3 and row.max_rebalances_per_period == 2
    assert row.max_weekly_turnover == pytest.approx(
        0.3
    ) and row.max_position_weight == pytest.approx(0.09)
    assert row.max_adv_participation == pytest.approx(0.03) and row.reward == pytest.approx(0.01)
    assert row.turnover == pytest.approx(0.6) and row.information_ratio is not None
    assert row.trading_days == 10 and row.halted_on is None and len(row.returns) == 10
    late = measure(result, "candidate", "abc", bench, "weekly", start=dates[3].date())
    assert late.trading_days == 7 and late.max_position_weight == pytest.approx(0.09)
    assert late.max_adv_participation == 0.0  # the fills were before the window
    empty = measure(
        ReplayResult("s", nav.assign(turnover=0.0), pd.DataFrame(), pd.DataFrame(), 1e7),
        "active",
        "x",
        bench,
        "weekly",
    )
    assert (empty.rebalances, empty.max_rebalances_per_period, empty.max_adv_participation) == (
        0,
        0,
        0.0,
    )
    halted = ReplayResult("s", nav, fills, pd.DataFrame(), 1e7, halted_on=dates[-1].date())
    # No "empty series"
    with pytest.raises(MetricsInputError, match="kill switch on 2024-07-12") as refused:
        measure(halted, "active", "x", bench, "weekly", start=date(2024, 8, 1))
    assert "active: no session to measure in the alert window from 2024-08-01" in str(refused.value)


def test_a_halted_replay_is_data_its_returns_after_the_halt_are_0_and_its_drawdown_counts() -> None:
    dates = pd.bdate_range("2024-07-01", periods=10)
    returns = np.array([0.0, -0.05, -0.1, -0.08, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])[
        :4
    ]  # halted on its 4th session
    nav = pd.DataFrame(
        {
            "date": dates[:4],
            "nav": 1e7 * np.cumprod(1 + returns),
            "cash": 0.0,
            "market_value": 0.0,
            "turnover": 0.5,
            "costs": 100.0,
            "realized_return": returns,
            "slippage_leakage": 0.0,
            "frictionless_return": returns,
            "reward": -0.1,
            "principal_loss": 0.21,
            "strategy_version": "v1",
        }
    )
    halted = ReplayResult("s", nav, pd.DataFrame(), pd.DataFrame(), 1e7, halted_on=dates[3].date())
    carried = after_halt(halted, dates)
    assert len(carried.nav) == 10 and carried.halted_on == dates[3].date()
    tail = carried.nav.iloc[4:]
    assert (
        (tail["realized_return"] == 0).all()
        and (tail["turnover"] == 0).all()
        and (tail["costs"] == 0).all()
    )
    assert (tail["nav"] == nav["nav"].iloc[-1]).all()  # the capital lost stays lost
    bench = pd.Series(0.001, index=pd.bdate_range("2024-06-20", periods=30))
    # A window after the halt
    late = measure(carried, "active", "x", bench, "weekly", start=dates[6].date())
    assert (
        late.trading_days == 4 and late.returns == [0.0] * 4 and late.halted_on == dates[3].date()
    )
    whole = measure(carried, "active", "x", bench, "weekly")
    assert whole.max_drawdown == pytest.approx(float(np.cumprod(1 + returns)[-1] - 1))
    # Not halted
    assert after_halt(ReplayResult("s", nav, pd.DataFrame(), pd.DataFrame(), 1e7), dates).nav is nav
    # The halted version is compared over every session: a flat candidate beats it net of friction.
    flat = whole.model_copy(
        update={"version": "candidate", "returns": [0.0] * 10, "halted_on": None}
    )
    check = not_worse(flat, whole)
    assert (
        check.passed
        and f"active halted by the kill switch on {dates[3].date()}, 0 after" in check.detail
    )
    assert "over 10 sessions" in check.detail


# weekly_liquidity that holds cash: it never loses its capital.
HOLDS_CASH = ("        adv = view.traded_value(params.adv_window)", "        return {}\n")


@pytest.mark.slow
def test_an_active_version_halted_by_the_kill_switch_is_measured_and_a_candidate_promoted_over_it(
    repair_home: Path, tmp_path: Path
) -> None:
    from oomrl.checkout import repo_root
    from oomrl.data.sample import ensure_sample
    from oomrl.repair.crossval import cross_validate, window_for
    from oomrl.settings import get_settings

    candidate = tmp_path / "candidate"
    shutil.copytree(
        repo_root() / "strategies",
        candidate / "strategies",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    module = candidate / "strategies" / "weekly_liquidity.py"
    text = module.read_text()
    assert HOLDS_CASH[0] in text
    module.write_text(text.replace(HOLDS_CASH[0], HOLDS_CASH[1] + HOLDS_CASH[0]))
    # 1 % of principal lost halts
    settings = get_settings(ledger={"kill_threshold": 0.01})
    store = ensure_sample(settings)
    start, end = window_for(store, date(2024, 7, 15), 20)
    result = cross_validate(
        candidate,
        repo_root(),
        "weekly_liquidity",
        WEEKLY,
        store,
        start,
        end,
        long_sessions=60,
        settings=settings,
        run_dir=tmp_path,
    )
    active = {row.window: row for row in result.rows if row.version == "active"}
    assert active["long"].halted_on is not None and active["long"].halted_on < start, active["long"]
    assert active["alert"].trading_days == 20 and set(active["alert"].returns) == {
        0.0
    }  # its capital was lost
    assert active["long"].trading_days == 60 and active["long"].max_drawdown <= -0.01
    assert result.passed, result.failures()
    text = (tmp_path / "cross_validation.md").read_text()
    assert text.startswith("# Cross-validation: PROMOTE") and "halted by the kill switch on" in text


@pytest.mark.slow
def test_cross_validate_replays_every_version_in_both_windows_even_from_an_older_workspace(
    repair_home: Path, tmp_path: Path
) -> None:
    from oomrl.checkout import repo_root
    from oomrl.data.sample import ensure_sample
    from oomrl.repair.crossval import cross_validate, window_for
    from oomrl.settings import get_settings

    old = tmp_path / "old"  # a version from before strategy_api: its own strategies/base.py
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "old_workspace", old)
    store = ensure_sample(get_settings())
    start, end = window_for(store, date(2024, 7, 15), 20)
    result = cross_validate(
        repo_root(),
        old,
        "weekly_liquidity",
        WEEKLY,
        store,
        start,
        end,
        baseline=(old, "old"),
        long_sessions=60,
        run_dir=tmp_path,
    )
    assert [(row.version, row.window) for row in result.rows] == [
        ("active", "long"),
        ("active", "alert"),
        ("candidate", "long"),
        ("candidate", "alert"),
        ("baseline", "long"),
        ("baseline", "alert"),
    ]
    alert = [row for row in result.rows if row.window == "alert"]
    assert all(row.trading_days == 20 for row in alert)
    assert all(row.trading_days == 60 for row in result.rows if row.window == "long")
    assert result.long_start is not None and result.long_start < start
    assert result.rows[2].max_rebalances_per_period == 1 and result.passed, result.failures()
    stateful = next(c for c in result.checks if c.name == "crossval.stateful")
    assert stateful.passed and f"10 of {result.rows[2].rebalances} decisions" in stateful.detail
    # The old version makes the same decisions as today's code: the same rows, but for the label.
    for mine, theirs in ((result.rows[0], result.rows[2]), (result.rows[1], result.rows[3])):
        assert mine.returns == theirs.returns and mine.turnover == theirs.turnover
    text = (tmp_path / "cross_validation.md").read_text()
    assert (
        text.startswith("# Cross-validation: PROMOTE")
        and "- **crossval.stateful**: passed — 10 of 14 decisions" in text
    )
    assert sorted(result.ranking) == ["active", "baseline", "candidate"]


# weekly_liquidity that leaves out its first pick from its fourth decision on in one process.
COUNTS_CALLS = (
    "\n_CALLS: list[int] = []\n",
    """
        _CALLS.append(1)
        if len(_CALLS) > 3 and picks:
            picks = picks[1:]
""",
)


@pytest.mark.slow
def test_a_candidate_whose_decisions_depend_on_earlier_calls_is_refused(
    repair_home: Path, tmp_path: Path
) -> None:
    from oomrl.checkout import repo_root
    from oomrl.data.sample import ensure_sample
    from oomrl.repair.crossval import cross_validate, window_for
    from oomrl.settings import get_settings

    candidate = tmp_path / "candidate"
    shutil.copytree(
        repo_root() / "strategies",
        candidate / "strategies",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    module = candidate / "strategies" / "weekly_liquidity.py"
    anchor = "        ideal = pd.Series(equal_weights(picks"
    text = module.read_text()
    assert anchor in text
    module.write_text(
        text.replace(
            "\n\nclass WeeklyLiquidityParams", COUNTS_CALLS[0] + "\n\nclass WeeklyLiquidityParams"
        ).replace(anchor, COUNTS_CALLS[1].lstrip("\n") + anchor)
    )
    store = ensure_sample(get_settings())
    start, end = window_for(store, date(2024, 7, 15), 20)
    result = cross_validate(
        candidate,
        repo_root(),
        "weekly_liquidity",
        Constraints(rebalance="weekly"),
        store,
        start,
        end,
        long_sessions=60,
        run_dir=tmp_path,
    )
    stateful = next(c for c in result.checks if c.name == "crossval.stateful")
    assert not stateful.passed and not result.passed
    candidate_days = next(r for r in result.rows if (r.version, r.window) == ("candidate", "long"))
    assert stateful.detail.startswith(f"10 of {candidate_days.rebalances} decisions (")
    # Dates and symbols named
    assert "gave other weights" in stateful.detail and ".S" in stateful.detail
    assert (
        "- **crossval.stateful**: FAILED — 10 of" in (tmp_path / "cross_validation.md").read_text()
    )


def test_the_stateful_check_names_the_dates_and_symbols_that_differ() -> None:
    from oomrl.portfolio.recompute import Difference, Recomputed
    from oomrl.repair.crossval import stateful_check

    days = [date(2024, 7, d) for d in (1, 8, 15)]
    same = stateful_check(Recomputed(days, 12, []))
    assert same.name == "crossval.stateful" and same.passed
    assert same.detail == (
        "3 of 12 decisions (2024-07-01..2024-07-15) recomputed each in a fresh host "
        "gave the same weights"
    )
    changed = stateful_check(
        Recomputed(
            days,
            12,
            [
                Difference(days[1], ["600519.SH", "000001.SZ"]),
                Difference(days[2], [], "strategy x raised KeyError"),
            ],
        )
    )
    assert not changed.passed
    assert changed.detail.endswith(
        "2024-07-08: 600519.SH, 000001.SZ; 2024-07-15: strategy x raised KeyError"
    )
    assert changed.detail.startswith(
        "3 of 12 decisions (2024-07-01..2024-07-15) recomputed each in a "
        "fresh host: 2 gave other weights"
    )
    assert stateful_check(Recomputed([], 0, [])).passed  # nothing decided, nothing to recompute
    found = rows()
    found[3].checks = [changed]  # the candidate's long row carries what its replay showed
    assert failed(checks_for(found, WEEKLY)) == ["crossval.stateful"]


def test_baseline_is_the_human_reference_or_the_last_version_promoted_to_the_account(
    tmp_path: Path,
) -> None:
    class Versions:
        def __init__(self, shas: list[str], accounts: dict[str, str] | None = None) -> None:
            self.workspace = tmp_path
            self.shas = shas
            self.accounts = accounts or {}

        def list(self) -> list:
            return [type("Info", (), {"sha": sha}) for sha in self.shas]

        def materialize(self, sha: str) -> Path:
            return tmp_path / "exports" / sha

        def git(self, *args: str) -> str:
            assert args[:3] == ("log", "-1", "--format=%(trailers:key=Oomrl-Account,valueonly)")
            return self.accounts.get(args[3], "") + "\n"

    assert baseline_of(Versions(["v1"]), "v1") is None  # nothing promoted yet
    assert baseline_of(Versions(["v1", "v2"]), "v2") is None  # B is the active version
    # After a rollback
    assert baseline_of(Versions(["v1", "v2"]), "v1") == (tmp_path / "exports" / "v2", "v2")
    # Per account: another account's later version is never this account's B.
    shared = Versions(["v1", "v2", "v3"], {"v2": "paper", "v3": "other"})
    assert baseline_of(shared, "v1", "paper") == (tmp_path / "exports" / "v2", "v2")
    # Its own last promotion is the active version
    assert baseline_of(shared, "v2", "paper") is None
    assert baseline_of(shared, "v1", "fresh") is None  # nothing was promoted to it
    (tmp_path / "reference" / "strategies").mkdir(parents=True)
    (tmp_path / "reference" / "strategies" / "__init__.py").write_text("")
    assert baseline_of(Versions(["v1"]), "v1") == (tmp_path / "reference", "reference")
