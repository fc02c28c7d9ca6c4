"""Financial cross-validation of a repair: replay candidate and active versions with the real broker, check the mandate."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel

from oomrl.agent.roles import Constraints
from oomrl.data.store import MarketStore
from oomrl.market.rules import AShareRules
from oomrl.metrics.io import align, returns_from_levels
from oomrl.metrics.performance import information_ratio, max_drawdown
from oomrl.portfolio.loader import load_strategy
from oomrl.portfolio.rebalance import load_panels
from oomrl.portfolio.replay import ReplayResult, replay
from oomrl.portfolio.service import membership

# Fills happen at other prices than the decision close and in 100-share lots, so measured
# participation and turnover may exceed the strategy's own caps a little; this relative slack is
# not a breach (measured on the bundled sample: turnover 0.3095 for a 0.30 budget).
PARTICIPATION_SLACK = 0.10
TURNOVER_SLACK = 0.05
HISTORY_DAYS = 150  # calendar days of bars before the window, for lookbacks and ADV


class VersionMeasures(BaseModel):
    """What one version did over the window, in the mandate's terms."""

    version: str
    sha: str
    trading_days: int
    rebalances: int
    max_rebalances_per_period: int
    max_adv_participation: float
    max_weekly_turnover: float
    turnover: float
    costs_fraction: float
    net_return: float
    information_ratio: float | None
    max_drawdown: float
    halted_on: date | None = None


class Check(BaseModel):
    """One pass/fail rule of cross-validation, with the numbers behind it."""

    name: str
    passed: bool
    detail: str


class CrossValidation(BaseModel):
    """The cross-validation table: the window, both versions' measures, and every check."""

    start: date
    end: date
    rows: list[VersionMeasures]
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]

    def table(self) -> list[dict[str, Any]]:
        """Rows for a table artifact."""
        return [row.model_dump(mode="json") for row in self.rows]


def period_key(day: pd.Timestamp, rebalance: str) -> tuple[int, int] | pd.Timestamp:
    """The period a trading day belongs to under a rebalance frequency."""
    year, week, _ = day.isocalendar()
    if rebalance == "weekly":
        return int(year), int(week)
    if rebalance == "biweekly":
        return int(year), (int(week) - 1) // 2
    if rebalance == "monthly":
        return day.year, day.month
    return day


def measure(result: ReplayResult, label: str, sha: str, benchmark: pd.Series,
            rebalance: str) -> VersionMeasures:
    """The mandate's quantities for one replay (turnover per ISO week; participation from fills)."""
    nav = result.nav.assign(date=pd.to_datetime(result.nav["date"]))
    traded = nav[nav["turnover"] > 0]
    per_period = traded["date"].map(lambda d: period_key(d, rebalance)).value_counts()
    weekly = nav.groupby(nav["date"].map(lambda d: period_key(d, "weekly")))["turnover"].sum()
    fills = result.fills
    participation = fills["adv_participation"].dropna() if len(fills) else pd.Series(dtype=float)
    returns = pd.Series(nav["realized_return"].to_numpy(), index=nav["date"], name=label)
    r, b = align(returns, benchmark)
    summary = result.summary()
    return VersionMeasures(
        version=label, sha=sha, trading_days=len(nav), rebalances=len(traded),
        max_rebalances_per_period=int(per_period.max()) if len(per_period) else 0,
        max_adv_participation=float(participation.max()) if len(participation) else 0.0,
        max_weekly_turnover=float(weekly.max()) if len(weekly) else 0.0,
        turnover=float(summary["turnover"]), costs_fraction=float(summary["costs_fraction"]),
        net_return=float(summary["net_return"]), information_ratio=information_ratio(r, b),
        max_drawdown=max_drawdown(r), halted_on=result.halted_on)


def checks_for(candidate: VersionMeasures, active: VersionMeasures, constraints: Constraints,
               ir_tolerance: float) -> list[Check]:
    """The candidate against the mandate's constraints and against the active version's net IR."""
    found: list[Check] = []
    if constraints.rebalance and constraints.rebalance != "daily":
        n = candidate.max_rebalances_per_period
        found.append(Check(name="rebalance", passed=n <= 1, detail=(
            f"at most {n} rebalance(s) in one {constraints.rebalance} period (limit 1)")))
    if constraints.max_adv_participation is not None:
        cap = constraints.max_adv_participation
        value = candidate.max_adv_participation
        found.append(Check(name="max_adv_participation", passed=value <= cap * (1 + PARTICIPATION_SLACK),
                           detail=f"largest fill took {value:.4f} of ADV (limit {cap})"))
    if constraints.max_weekly_turnover is not None:
        cap = constraints.max_weekly_turnover
        value = candidate.max_weekly_turnover
        found.append(Check(name="max_weekly_turnover", passed=value <= cap * (1 + TURNOVER_SLACK),
                           detail=f"busiest week traded {value:.4f} of NAV (limit {cap})"))
    extra = constraints.model_extra or {}
    if extra.get("max_drawdown") is not None:
        limit = float(extra["max_drawdown"])
        found.append(Check(name="max_drawdown", passed=-candidate.max_drawdown <= limit,
                           detail=f"drawdown {candidate.max_drawdown:.4f} (limit -{limit})"))
    if extra.get("min_information_ratio") is not None:
        floor = float(extra["min_information_ratio"])
        ir = candidate.information_ratio
        found.append(Check(name="min_information_ratio", passed=ir is not None and ir >= floor,
                           detail=f"net IR {ir} (floor {floor})"))
    cand_ir, act_ir = candidate.information_ratio, active.information_ratio
    if act_ir is None:
        ok, detail = True, "the active version has no IR over the window; nothing to compare"
    else:
        ok = cand_ir is not None and cand_ir >= act_ir - ir_tolerance
        detail = f"candidate net IR {cand_ir} vs active {act_ir:.4f} (tolerance {ir_tolerance})"
    found.append(Check(name="net_information_ratio", passed=ok, detail=detail))
    return found


def window_for(store: MarketStore, as_of: date | None, sessions: int) -> tuple[date, date]:
    """The last `sessions` sessions of stored data up to `as_of` (default: the latest)."""
    index = store.read_index("000300")
    dates = index.index[index.index <= pd.Timestamp(as_of)] if as_of else index.index
    if len(dates) < 2:
        raise ValueError(f"no benchmark data to cross-validate on up to {as_of}")
    window = dates[-sessions:]
    return window[0].date(), window[-1].date()


def replay_version(label: str, root: Path, sha: str, strategy: str, panels: Any, universe: Any,
                   benchmark: pd.Series, rebalance: str, start: date, end: date,
                   rules: AShareRules | None, initial_cash: float) -> VersionMeasures:
    """Replay one version (loaded from its own folder) and measure it; runs anywhere, e.g. a Dask worker."""
    loaded = load_strategy(root, strategy)
    # A workspace from before point-in-time membership has a MarketView without `members`.
    knows_members = "members" in inspect.signature(loaded.view_class).parameters
    result = replay(loaded.strategy, None, panels, start, end, rules=rules,  # type: ignore[arg-type]
                    initial_cash=initial_cash, version=sha, view_class=loaded.view_class,
                    membership=universe if knows_members else None)
    return measure(result, label, sha, benchmark, rebalance)


# Runs replay_version over keyword-argument sets; the default runs them one after another here.
VersionMapper = Callable[[list[dict[str, Any]]], list[VersionMeasures]]


def run_in_process(calls: list[dict[str, Any]]) -> list[VersionMeasures]:
    """The default VersionMapper: each replay in this process, in order."""
    return [replay_version(**call) for call in calls]


def cross_validate(candidate_root: Path, active_root: Path, strategy: str, constraints: Constraints,
                   store: MarketStore, start: date, end: date, *, candidate_sha: str = "candidate",
                   active_sha: str = "active", ir_tolerance: float = 0.5,
                   rules: AShareRules | None = None, initial_cash: float = 10_000_000.0,
                   mapper: VersionMapper = run_in_process) -> CrossValidation:
    """Replay both versions over [start, end] with the paper broker and judge the candidate."""
    panels = load_panels(store, end, history_days=(end - start).days + HISTORY_DAYS)
    universe = membership(store)  # point-in-time CSI 300 members, as `oomrl replay` uses them
    benchmark = returns_from_levels(store.read_index("000300")).rename("benchmark")
    shared = {"strategy": strategy, "panels": panels, "universe": universe, "benchmark": benchmark,
              "rebalance": constraints.rebalance or "daily", "start": start, "end": end,
              "rules": rules, "initial_cash": initial_cash}
    rows = mapper([{"label": "active", "root": active_root, "sha": active_sha, **shared},
                   {"label": "candidate", "root": candidate_root, "sha": candidate_sha, **shared}])
    active, candidate = rows
    return CrossValidation(start=start, end=end, rows=rows,
                           checks=checks_for(candidate, active, constraints, ir_tolerance))
