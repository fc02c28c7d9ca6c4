"""Memorization probes (issue 26): a strategy that knows which stock or which date it trades is
refused (`crossval.memorized`); the bundled strategies, reading only the market, pass."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.diagnostics.mandate import Constraints
from oomrl.market.rules import AShareRules
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.probes import MONTHS, family, relabelled, seed_of, shifted
from oomrl.repair.crossval import Check

WEEKLY = Constraints(rebalance="weekly")
ANCHOR = "        ideal = pd.Series(equal_weights(picks"
SYMBOLS = [
    "600000.SH",
    "600519.SH",
    "601318.SH",
    "688001.SH",
    "688981.SH",
    "000001.SZ",
    "000002.SZ",
    "300750.SZ",
    "300059.SZ",
    "002594.SZ",
]


def toy_market(days: pd.DatetimeIndex) -> MarketFrames:
    rng = np.random.default_rng(0)
    close = pd.DataFrame(10 + rng.random((len(days), len(SYMBOLS))), index=days, columns=SYMBOLS)
    return MarketFrames.build({"close": close, "volume": close * 1000}, AShareRules())


def test_the_relabelling_permutes_symbols_within_each_board_family_and_carries_their_data() -> None:
    market = toy_market(pd.bdate_range("2024-01-02", periods=30))
    probe = relabelled(market, seed_of("a1b2c3"))
    assert sorted(probe.source) == list(range(len(SYMBOLS))) and list(probe.source) != list(
        range(len(SYMBOLS))
    )
    for label, origin in enumerate(probe.source):
        # Same exchange and board: same limits, lots
        assert family(SYMBOLS[label]) == family(SYMBOLS[origin])
        assert (
            probe.market.panels["close"].iloc[:, label].to_numpy()
            == market.panels["close"].iloc[:, origin].to_numpy()
        ).all()
    assert list(probe.relabel(probe.source)) == list(range(len(SYMBOLS)))  # the inverse
    assert family("688001.SH") != family("600000.SH") != family("000001.SZ")
    # One commit, one probe
    assert list(relabelled(market, seed_of("a1b2c3")).source) == list(probe.source)
    assert list(relabelled(market, seed_of("d4e5f6")).source) != list(probe.source)


def test_the_date_shift_keeps_weekdays_and_weeks_and_a_monthly_one_keeps_month_ends() -> None:
    days = pd.bdate_range("2024-01-02", "2024-04-30")
    market = toy_market(days)
    weekly = shifted(market, seed_of("a1b2c3"))
    moved = weekly.market.dates
    assert (moved < days).all() and ((days - moved).days % 7 == 0).all()
    assert list(moved.weekday) == list(days.weekday)
    assert list(weekly.market.days) == [d.date() for d in moved] and "weeks" in weekly.name
    monthly = shifted(market, seed_of("a1b2c3"), "monthly").market.dates
    assert list(monthly.day) == list(days.day) and list(monthly.month) == list(days.month)
    assert all(
        (d.year - m.year) * 12 % MONTHS == 0 and d.year != m.year
        for d, m in zip(days, monthly, strict=True)
    )

    def month_ends(dates: pd.DatetimeIndex) -> list[int]:  # positions of each month's last session
        return [i for i in range(len(dates) - 1) if dates[i].month != dates[i + 1].month]

    assert month_ends(monthly) == month_ends(days) and pd.Timestamp("2024-02-29") in days
    assert pd.Timestamp(year=monthly[0].year, month=2, day=29) in monthly  # a leap day stays one


def best_names_per_date(sample: Path) -> dict[str, list[str]]:
    """The ten CSI 300 names with the best next-week return for every session of 2024 in the bundled
    data (what a model that has read how 2024 ended could write down)."""
    bars = pd.read_parquet(
        Path(__file__).resolve().parents[2] / "data" / "sample" / "bars.parquet",
        columns=["date", "symbol", "close"],
    )
    close = bars.assign(date=pd.to_datetime(bars["date"])).pivot(
        index="date", columns="symbol", values="close"
    )
    close = close[(close.index >= "2023-12-01") & (close.index <= "2025-01-31")]
    # Decided on d (rows to d), bought at d+1, held a week
    ahead = close.shift(-6) / close.shift(-1) - 1
    return {
        str(day.date()): sorted(row.dropna().sort_values(ascending=False).index[:10].astype(str))
        for day, row in ahead.iterrows()
        if day.year == 2024 and row.notna().sum() >= 10
    }


MEMORIZER = """
        names = _BEST.get(str(view.as_of)[:10])  # recall, not skill
        if names:
            return equal_weights(names, params.gross_exposure)
"""


def workspace_with(tmp_path: Path, name: str, edit: dict[str, str]) -> Path:
    from oomrl.checkout import repo_root

    root = tmp_path / name
    shutil.copytree(
        repo_root() / "strategies",
        root / "strategies",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    module = root / "strategies" / "weekly_liquidity.py"
    text = module.read_text()
    for old, new in edit.items():
        assert old in text
        text = text.replace(old, new)
    module.write_text(text)
    return root


@pytest.mark.slow
def test_a_patch_holding_the_best_names_per_date_is_refused_as_memorized(
    repair_home: Path, tmp_path: Path
) -> None:
    from oomrl.checkout import repo_root
    from oomrl.data.sample import ensure_sample
    from oomrl.repair.crossval import cross_validate, window_for
    from oomrl.settings import get_settings

    table = best_names_per_date(repair_home)
    candidate = workspace_with(
        tmp_path,
        "memorizer",
        {
            "\n\nclass WeeklyLiquidityParams": f"\n_BEST = {table!r}"
            "\n\n\nclass WeeklyLiquidityParams",
            ANCHOR: MEMORIZER.lstrip("\n") + ANCHOR,
        },
    )
    store = ensure_sample(get_settings())
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
        run_dir=tmp_path,
    )
    by = {(r.version, r.window): r for r in result.rows}
    # Recall pays
    assert by[("candidate", "long")].net_return > by[("active", "long")].net_return + 0.10
    memorized = next(c for c in result.checks if c.name == "crossval.memorized")
    assert not memorized.passed and not result.passed
    for probe in ("symbols relabelled at random within each board: ", "dates shifted back by "):
        assert probe in memorized.detail
    first = memorized.detail.split("differ (")[1]
    # The dates and the symbols where decisions differ
    assert f"{start.year}-0" in first and ".S" in first
    assert "- **crossval.memorized**: FAILED" in (tmp_path / "cross_validation.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["weekly_liquidity", "daily_momentum"])
def test_the_bundled_strategies_pass_the_probes(strategy: str, repair_home: Path) -> None:
    memorized = probe_check(strategy, repair_home, None)
    assert memorized.passed, memorized.detail
    assert "decisions of the alert window asked again" in memorized.detail


def probe_check(
    strategy: str, repair_home: Path, root: Path | None, as_of: date = date(2024, 7, 15)
) -> Check:
    """The crossval.memorized check of one replay of `strategy` (from `root`, else the
    repository)."""
    from oomrl.checkout import repo_root
    from oomrl.data.sample import ensure_sample
    from oomrl.metrics.io import returns_from_levels
    from oomrl.portfolio.rebalance import load_panels
    from oomrl.portfolio.service import membership
    from oomrl.repair.crossval import HISTORY_DAYS, replay_version, window_for
    from oomrl.settings import get_settings

    store = ensure_sample(get_settings())
    start, end = window_for(store, as_of, 40)
    panels = load_panels(store, end, history_days=(end - start).days + HISTORY_DAYS)
    rows = replay_version(
        "candidate",
        root or repo_root(),
        "sha",
        strategy,
        panels,
        membership(store),
        returns_from_levels(store.read_index("000300")),
        "weekly",
        start,
        end,
        None,
        10_000_000.0,
        alert_start=start,
        probes=True,
    )
    return next(c for c in rows[0].checks if c.name == "crossval.memorized")


WEEKLY_TEST = "        return last_rebalance is None or iso_week(day) != iso_week(last_rebalance)"
MONTHLY_TEST = (
    "        return last_rebalance is None"
    " or (day.year, day.month) != (last_rebalance.year, last_rebalance.month)"
)
MONTHLY = {WEEKLY_TEST: MONTHLY_TEST}
NAME_LINE = '    name: ClassVar[str] = "weekly_liquidity"'


@pytest.mark.slow
def test_a_declared_monthly_calendar_is_shifted_by_whole_months(
    repair_home: Path, tmp_path: Path
) -> None:
    undeclared = workspace_with(tmp_path, "undeclared", MONTHLY)
    check = probe_check("weekly_liquidity", repair_home, undeclared)
    # Month starts moved with weeks
    assert not check.passed and "the schedule trades on" in check.detail
    declared = workspace_with(
        tmp_path,
        "declared",
        {**MONTHLY, NAME_LINE: NAME_LINE + '\n    calendar: ClassVar[str] = "monthly"'},
    )
    check = probe_check("weekly_liquidity", repair_home, declared)
    assert check.passed and "months" in check.detail, check.detail


@pytest.mark.slow
def test_an_unknown_calendar_declaration_is_refused_by_name(
    repair_home: Path, tmp_path: Path
) -> None:
    from oomrl.errors import StrategyFailedError

    root = workspace_with(tmp_path, "daily", {NAME_LINE: NAME_LINE + '\n    calendar = "daily"'})
    with pytest.raises(
        StrategyFailedError, match="declares calendar 'daily'; known: weekly, monthly"
    ):
        probe_check("weekly_liquidity", repair_home, root)


def test_the_probes_seed_is_the_candidates_code(tmp_path: Path) -> None:
    from oomrl.checkout import repo_root
    from oomrl.portfolio.hosting import WorkspaceStrategy

    same = workspace_with(tmp_path, "same", {})
    patched = workspace_with(
        tmp_path, "patched", {"top_k: int = Field(30": "top_k: int = Field(31"}
    )
    (same / "strategies" / "__pycache__").mkdir(exist_ok=True)
    (same / "strategies" / "__pycache__" / "x.py").write_text("compiled = 1\n")  # not the code
    digest = WorkspaceStrategy(repo_root(), "weekly_liquidity").digest()
    assert WorkspaceStrategy(same, "weekly_liquidity").digest() == digest
    assert WorkspaceStrategy(patched, "weekly_liquidity").digest() != digest
    assert seed_of(digest) != seed_of(WorkspaceStrategy(patched, "weekly_liquidity").digest())
