"""Financial cross-validation of a repair (the paper's CrossValidate(T', B)): evidence first.

Three versions are replayed: candidate, active version and baseline B. B is a human reference in
the workspace's `reference/`, else the last promoted version. Each runs with the real broker from
one RebalanceSetup factory. The long window ends at the alert. Each is measured over the alert
window (its last sessions) and the long window. The candidate is promoted only when all four hold.
- It satisfies every constraint the mandate states, measured over the long window. Those are
  rebalance schedule, ADV participation, weekly turnover, position weight, drawdown, IR floor.
- Net of friction it meets the promotion rule (`PromotionRule`). The rule is non-inferiority with a
  stated margin, or superiority. It must hold against the active version and against B in either
  window. It is judged on the mean paired daily return difference (annualized) and its standard
  error. The rule is printed with the decision. A version the kill switch halted lost its capital.
  Its returns after the halt are 0 (`after_halt`).
- It keeps no memory across decisions (`crossval.stateful`). A sample of its decisions is taken (at
  least 10, evenly spread). Each is recomputed in a fresh strategy host from the rows up to its
  date. Each gives the same weights as its sequential replay.
- It does not know which stock or date it trades (`crossval.memorized`, oomrl.portfolio.probes).
  Its decisions in the alert window are asked again on a changed market. Symbols are relabelled
  within each board. Dates are shifted by whole weeks (whole months for a strategy that declares a
  monthly calendar). The decisions must be the same.
The decision table (`decision_markdown`) is written to the run folder for the flow to publish.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field

from oomrl.artifacts import Columns, cell_text, markdown_table
from oomrl.data.store import MarketStore
from oomrl.diagnostics.mandate import Constraints
from oomrl.errors import MetricsInputError
from oomrl.market.rules import FrictionRules
from oomrl.metrics.io import align, returns_from_levels
from oomrl.metrics.performance import information_ratio, max_drawdown
from oomrl.portfolio.hosting import WorkspaceStrategy
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.probes import MEMORIZED, ProbeResult, run_probes, seed_of
from oomrl.portfolio.rebalance import load_panels
from oomrl.portfolio.recompute import FRESH_DECISIONS, Recomputed, recompute_fresh
from oomrl.portfolio.replay import ReplayResult, replay_setup
from oomrl.portfolio.service import membership
from oomrl.portfolio.setup import rebalance_setup
from oomrl.settings import OomrlSettings, get_settings
from strategy_api.periods import period_key

# Fills happen at other prices than the decision close and in board lots.
# So measured participation, turnover and weights may exceed the strategy's own caps a little.
# This relative slack is not a breach.
# Measured on the bundled sample: turnover 0.3095 for a 0.30 budget.
PARTICIPATION_SLACK = 0.10
TURNOVER_SLACK = 0.05
WEIGHT_SLACK = 0.05
HISTORY_DAYS = 150  # calendar days of bars before the window, for lookbacks and ADV
LONG_SESSIONS = 250  # the longer window: about a year of sessions up to the alert
TRADING_DAYS = 252
ROUNDING = 1e-9  # annualized: a mean difference this small is float rounding, not evidence
STATEFUL = "crossval.stateful"  # the no-memory-across-decisions check's name
SHOWN = 3  # differences named per failed probe


class PromotionRule(BaseModel):
    """How the candidate is compared with the active version and B, net of friction.

    The comparison uses paired daily differences. non-inferiority: the mean difference less z
    standard errors is >= -margin. superiority: it is > margin. Margin and mean are annualized
    fractions (0.05 = 5 % a year).
    """

    test: Literal["non-inferiority", "superiority"] = "non-inferiority"
    margin: float = Field(0.0, ge=0.0)
    z: float = Field(0.0, ge=0.0)

    def bound(self, error: float) -> float:
        """The lowest annualized mean difference that passes, for this standard error."""
        return self.z * error + (self.margin if self.test == "superiority" else -self.margin)

    def passes(self, mean: float, error: float) -> bool:
        # Floating-point sums of equal returns differ in the last bits
        low = mean - self.z * error + ROUNDING
        return low > self.margin if self.test == "superiority" else low >= -self.margin

    def describe(self) -> str:
        sign = "> +" if self.test == "superiority" else ">= -"
        return f"{self.test}: mean - {self.z:g} SE {sign}{self.margin:.2%} a year"


DEFAULT_RULE = PromotionRule()


class Check(BaseModel):
    """One pass/fail rule of cross-validation, with the numbers behind it."""

    name: str
    passed: bool
    detail: str


class VersionMeasures(BaseModel):
    """What one version did over one window, in the mandate's terms, with its daily returns."""

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
    window: str = "alert"
    max_position_weight: float = 0.0
    reward: float = 0.0  # sum of the paper's step rewards (Eq. 1-2) over the window
    raw_prices_known: float = 1.0
    dates: list[date] = []
    returns: list[float] = []
    checks: list[
        Check
    ] = []  # what its replay itself showed (crossval.stateful), on the long window


class CrossValidation(BaseModel):
    """The decision: windows, every version's measures, every check, and the ranking by reward."""

    start: date
    end: date
    rows: list[VersionMeasures]
    checks: list[Check]
    long_start: date | None = None
    rule: PromotionRule = Field(default_factory=lambda: DEFAULT_RULE)
    ranking: list[str] = []  # versions by total reward over the long window, best first

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]

    def table(self) -> list[dict[str, Any]]:
        """Rows for a table artifact: one per version and window (daily series left out)."""
        return [
            row.model_dump(mode="json", exclude={"dates", "returns", "checks"}) for row in self.rows
        ]

    def decision_markdown(self) -> str:
        """The decision as markdown: windows, measures (versions × windows as columns), checks,
        verdict."""
        return crossval_markdown(self)

    def write(self, run_dir: Path) -> Path:
        """The decision table as `cross_validation.md` in the run folder (what the flow
        publishes)."""
        path = Path(run_dir) / "cross_validation.md"
        path.write_text(self.decision_markdown(), encoding="utf-8")
        return path


def after_halt(result: ReplayResult, sessions: pd.DatetimeIndex) -> ReplayResult:
    """A halted replay carried to the window's end.

    The version lost its capital. So every later session returns 0 at the NAV it halted on. Its
    drawdown counts; it trades no more.
    """
    if result.halted_on is None or result.nav.empty:
        return result
    dates = pd.to_datetime(result.nav["date"])
    later = sessions[sessions > dates.max()]
    if not len(later):
        return result
    last = result.nav.iloc[-1]
    idle = {
        "frictionless_return": 0.0,
        "realized_return": 0.0,
        "slippage_leakage": 0.0,
        "turnover": 0.0,
        "costs": 0.0,
        "reward": 0.0,
    }
    tail = pd.DataFrame(
        [{**last.to_dict(), **idle, "date": day} for day in later], columns=result.nav.columns
    )
    nav = pd.concat([result.nav.assign(date=dates), tail], ignore_index=True)
    return replace(result, nav=nav)


def measure(
    result: ReplayResult,
    label: str,
    sha: str,
    benchmark: pd.Series,
    rebalance: str,
    start: date | None = None,
    window: str = "alert",
) -> VersionMeasures:
    """The mandate's quantities for one replay from `start` on.

    Turnover is per ISO week; participation comes from fills.
    """
    nav = result.nav.assign(date=pd.to_datetime(result.nav["date"]))
    fills = result.fills
    if start is not None:
        nav = nav[nav["date"] >= pd.Timestamp(start)]
        # E.g. the kill switch halted the replay before the window: say so, not "empty series"
        if nav.empty:
            halted = (
                f": its replay was halted by the kill switch on {result.halted_on}"
                if result.halted_on
                else ""
            )
            raise MetricsInputError(
                f"{label}: no session to measure in the {window} window from {start}{halted}"
            )
        if len(fills):
            fills = fills[pd.to_datetime(fills["date"]) >= pd.Timestamp(start)]
    traded = nav[nav["turnover"] > 0]
    per_period = traded["date"].map(lambda d: period_key(d, rebalance)).value_counts()
    weekly = nav.groupby(nav["date"].map(lambda d: period_key(d, "weekly")))["turnover"].sum()
    participation = fills["adv_participation"].dropna() if len(fills) else pd.Series(dtype=float)
    returns = pd.Series(nav["realized_return"].to_numpy(dtype=float), index=nav["date"], name=label)
    r, b = align(returns, benchmark)
    first_nav = (
        float(nav["nav"].iloc[0] / (1 + nav["realized_return"].iloc[0])) if len(nav) else 1.0
    )
    weights = result.max_weight
    if start is not None and len(weights):
        weights = weights[pd.to_datetime(weights.index) >= pd.Timestamp(start)]
    return VersionMeasures(
        version=label,
        sha=sha,
        trading_days=len(nav),
        rebalances=len(traded),
        max_rebalances_per_period=int(per_period.max()) if len(per_period) else 0,
        max_adv_participation=float(participation.max()) if len(participation) else 0.0,
        max_weekly_turnover=float(weekly.max()) if len(weekly) else 0.0,
        turnover=float(nav["turnover"].sum()),
        costs_fraction=float(nav["costs"].sum()) / result.initial_cash,
        net_return=float(nav["nav"].iloc[-1]) / first_nav - 1.0 if len(nav) else 0.0,
        information_ratio=information_ratio(r, b),
        max_drawdown=max_drawdown(r),
        halted_on=result.halted_on,
        window=window,
        max_position_weight=float(weights.max()) if len(weights) else 0.0,
        reward=float(nav["reward"].sum()) if "reward" in nav else 0.0,
        raw_prices_known=result.raw_prices_known,
        dates=[d.date() for d in nav["date"]],
        returns=[float(x) for x in nav["realized_return"]],
    )


def constraint_checks(candidate: VersionMeasures, constraints: Constraints) -> list[Check]:
    """The candidate against every constraint the mandate states."""
    found: list[Check] = []
    if constraints.rebalance and constraints.rebalance != "daily":
        n = candidate.max_rebalances_per_period
        found.append(
            Check(
                name="rebalance",
                passed=n <= 1,
                detail=(
                    f"at most {n} rebalance(s) in one {constraints.rebalance} period (limit 1)"
                ),
            )
        )
    if constraints.max_adv_participation is not None:
        cap, value = constraints.max_adv_participation, candidate.max_adv_participation
        found.append(
            Check(
                name="max_adv_participation",
                passed=value <= cap * (1 + PARTICIPATION_SLACK),
                detail=f"largest fill took {value:.4f} of ADV (limit {cap})",
            )
        )
    if constraints.max_weekly_turnover is not None:
        cap, value = constraints.max_weekly_turnover, candidate.max_weekly_turnover
        found.append(
            Check(
                name="max_weekly_turnover",
                passed=value <= cap * (1 + TURNOVER_SLACK),
                detail=f"busiest week traded {value:.4f} of NAV (limit {cap})",
            )
        )
    extra = constraints.model_extra or {}
    if extra.get("max_position_weight") is not None:
        cap, value = float(extra["max_position_weight"]), candidate.max_position_weight
        found.append(
            Check(
                name="max_position_weight",
                passed=value <= cap * (1 + WEIGHT_SLACK),
                detail=f"largest position was {value:.4f} of NAV at a rebalance close "
                f"(limit {cap})",
            )
        )
    if extra.get("max_drawdown") is not None:
        limit = float(extra["max_drawdown"])
        found.append(
            Check(
                name="max_drawdown",
                passed=-candidate.max_drawdown <= limit,
                detail=f"drawdown {candidate.max_drawdown:.4f} (limit -{limit})",
            )
        )
    if extra.get("min_information_ratio") is not None:
        floor, ir = float(extra["min_information_ratio"]), candidate.information_ratio
        found.append(
            Check(
                name="min_information_ratio",
                passed=ir is not None and ir >= floor,
                detail=f"net IR {ir} (floor {floor})",
            )
        )
    if candidate.halted_on is not None:
        found.append(
            Check(
                name="kill_switch",
                passed=False,
                detail=f"the candidate's replay halted on {candidate.halted_on}",
            )
        )
    return found


def not_worse(
    candidate: VersionMeasures, other: VersionMeasures, rule: PromotionRule = DEFAULT_RULE
) -> Check:
    """The promotion rule net of friction.

    It is judged on the mean paired daily return difference and its standard error.
    """
    mine = pd.Series(candidate.returns, index=pd.DatetimeIndex(candidate.dates))
    theirs = pd.Series(other.returns, index=pd.DatetimeIndex(other.dates))
    diff = (mine - theirs).dropna()
    name = f"net_of_friction_vs_{other.version}_{candidate.window}"
    if len(diff) < 2:
        return Check(
            name=name,
            passed=True,
            detail=f"fewer than 2 common sessions with {other.version}: no comparison",
        )
    mean = float(diff.mean()) * TRADING_DAYS
    error = float(diff.std(ddof=1)) * TRADING_DAYS / math.sqrt(len(diff))
    first, last = diff.index[0].date(), diff.index[-1].date()
    return Check(
        name=name,
        passed=rule.passes(mean, error),
        detail=(
            f"candidate - {other.version} ({other.sha[:10]}) over {len(diff)} sessions "
            f"{first}..{last}: "
            f"{mean:+.2%} a year, standard error {error:.2%}; rule {rule.describe()} "
            f"(needs {rule.bound(error):+.2%}; candidate net return {candidate.net_return:+.2%} vs "
            f"{other.net_return:+.2%}; IR {_ir(candidate)} vs {_ir(other)}"
            + (
                f"; {other.version} halted by the kill switch on {other.halted_on}, 0 after"
                if other.halted_on
                else ""
            )
            + ")"
        ),
    )


def _ir(row: VersionMeasures) -> str:
    return "-" if row.information_ratio is None else f"{row.information_ratio:.2f}"


def checks_for(
    rows: list[VersionMeasures], constraints: Constraints, rule: PromotionRule = DEFAULT_RULE
) -> list[Check]:
    """Constraints on the candidate's long window.

    Then the promotion rule vs active and B in both windows.
    """
    by = {(r.version, r.window): r for r in rows}
    found = (
        constraint_checks(by[("candidate", "long")], constraints) + by[("candidate", "long")].checks
    )
    for window in ("alert", "long"):
        for other in ("active", "baseline"):
            if (other, window) in by:
                found.append(not_worse(by[("candidate", window)], by[(other, window)], rule))
    return found


def window_for(store: MarketStore, as_of: date | None, sessions: int) -> tuple[date, date]:
    """The last `sessions` sessions of stored data up to `as_of` (default: the latest)."""
    index = store.read_index("000300")
    dates = index.index[index.index <= pd.Timestamp(as_of)] if as_of else index.index
    if len(dates) < 2:
        raise ValueError(f"no benchmark data to cross-validate on up to {as_of}")
    window = dates[-sessions:]
    return window[0].date(), window[-1].date()


def long_window_start(store: MarketStore, start: date, end: date, sessions: int) -> date:
    """The long window's first session: `sessions` back from `end`.

    It is never before the membership is known.
    """
    first, _ = window_for(store, end, sessions)
    members = membership(store)
    if members is not None:
        known = pd.to_datetime(members["effective_date"]).min().date()
        first = max(first, known)
    return min(first, start)


def replay_version(
    label: str,
    root: Path,
    sha: str,
    strategy: str,
    panels: Any,
    universe: Any,
    benchmark: pd.Series,
    rebalance: str,
    start: date,
    end: date,
    rules: FrictionRules | None,
    initial_cash: float,
    settings: OomrlSettings | None = None,
    alert_start: date | None = None,
    fresh_decisions: int = 0,
    probes: bool = False,
) -> list[VersionMeasures]:
    """Replay one version and measure it over the long and the alert window.

    It replays from its own folder, in a strategy host. With `fresh_decisions`, that many of its
    decisions (evenly spread) are recomputed. Each runs in a fresh host and must give the same
    weights. That is the `crossval.stateful` check on the long row. With `probes`, its decisions in
    the alert window are asked again. The markets are relabelled and date-shifted. The decisions
    must be the same. That is the `crossval.memorized` check on the long row. Runs anywhere (e.g. a
    Dask worker). The setup comes from the one factory, with the given settings.
    """
    settings = settings or get_settings()
    source = WorkspaceStrategy(root, strategy, settings.runtime.unsafe_no_jail)
    setup = rebalance_setup(source, sha, settings, universe)
    if rules is not None:
        setup.rules = rules
    market = MarketFrames.build(panels, setup.rules)
    runner = source.open(setup.params, market, record=fresh_decisions > 0 or probes)
    try:
        result = replay_setup(setup, market, start, end, initial_cash, runner=runner)
    finally:
        runner.close()
    in_window = (market.dates >= pd.Timestamp(start)) & (market.dates <= pd.Timestamp(end))
    result = after_halt(result, market.dates[in_window])
    rows = [measure(result, label, sha, benchmark, rebalance, None, "long")]
    rows.append(measure(result, label, sha, benchmark, rebalance, alert_start or start, "alert"))
    if fresh_decisions:
        recomputed = recompute_fresh(
            source, setup.params, market, runner.decisions or [], fresh_decisions
        )
        rows[0].checks.append(stateful_check(recomputed))
    if probes:
        found = run_probes(
            source,
            setup.params,
            market,
            runner.decisions or [],
            alert_start or start,
            runner.calendar,
            seed_of(source.digest()),
        )
        rows[0].checks.append(memorized_check(found))
    return rows


def memorized_check(found: list[ProbeResult]) -> Check:
    """`crossval.memorized`: on every probe's market the decisions were the same (the first few
    differences named)."""
    failed = [result for result in found if result.differences]
    asked = ", ".join(f"{result.name}" for result in found)
    checked = found[0].checked if found else 0
    if not failed:
        return Check(
            name=MEMORIZED,
            passed=True,
            detail=(f"{checked} decisions of the alert window asked again ({asked}) were the same"),
        )
    return Check(
        name=MEMORIZED,
        passed=False,
        detail="; ".join(
            f"{result.name}: {len(result.differences)} of {result.checked} decisions "
            "differ (the strategy "
            f"knows which stock or date it is, not only what the market shows): "
            + "; ".join(d.describe() for d in result.differences[:SHOWN])
            for result in failed
        ),
    )


def stateful_check(recomputed: Recomputed) -> Check:
    """`crossval.stateful`: the sampled decisions, each recomputed in a fresh host, gave the same
    weights."""
    checked, differences = recomputed.checked, recomputed.differences
    where = f"{len(checked)} of {recomputed.total} decisions" + (
        f" ({checked[0]}..{checked[-1]})" if checked else ""
    )
    if not checked:
        return Check(
            name=STATEFUL, passed=True, detail="the candidate made no decision to recompute"
        )
    if not differences:
        return Check(
            name=STATEFUL,
            passed=True,
            detail=f"{where} recomputed each in a fresh host gave the same weights",
        )
    return Check(
        name=STATEFUL,
        passed=False,
        detail=(
            f"{where} recomputed each in a fresh host: {len(differences)} gave other "
            "weights than in the "
            f"replay (a decision depended on earlier calls): "
            + "; ".join(d.describe() for d in differences)
        ),
    )


# Runs replay_version over keyword-argument sets; the default runs them one after another here.
VersionMapper = Callable[[list[dict[str, Any]]], list[list[VersionMeasures]]]


def run_in_process(calls: list[dict[str, Any]]) -> list[list[VersionMeasures]]:
    """The default VersionMapper: each replay in this process, in order."""
    return [replay_version(**call) for call in calls]


def baseline_of(
    versions: Any, active_sha: str, account: str | None = None
) -> tuple[Path, str] | None:
    """Baseline B: a human reference (`reference/strategies/` in the workspace).

    Else the last version promoted to `account`, when it is not the active one. Its commit's
    `Oomrl-Account` trailer says so; another account's never counts. None when B is the active
    version itself or nothing was promoted.
    """
    reference = Path(versions.workspace) / "reference"
    if (reference / "strategies" / "__init__.py").is_file():
        return reference, "reference"
    promoted = [
        info.sha
        for info in versions.list()[1:]  # the first is the initial version, never promoted
        if account is None or promoted_to(versions, info.sha) == account
    ]
    if not promoted or promoted[-1] == active_sha:
        return None
    return versions.materialize(promoted[-1]), promoted[-1]


def promoted_to(versions: Any, sha: str) -> str:
    """The account a version was promoted to, from its commit's `Oomrl-Account` trailer ("" when
    none)."""
    return str(
        versions.git("log", "-1", "--format=%(trailers:key=Oomrl-Account,valueonly)", sha)
    ).strip()


def cross_validate(
    candidate_root: Path,
    active_root: Path,
    strategy: str,
    constraints: Constraints,
    store: MarketStore,
    start: date,
    end: date,
    *,
    candidate_sha: str = "candidate",
    active_sha: str = "active",
    rules: FrictionRules | None = None,
    initial_cash: float = 10_000_000.0,
    mapper: VersionMapper = run_in_process,
    settings: OomrlSettings | None = None,
    baseline: tuple[Path, str] | None = None,
    long_sessions: int = LONG_SESSIONS,
    rule: PromotionRule = DEFAULT_RULE,
    run_dir: Path | None = None,
) -> CrossValidation:
    """Replay candidate, active and baseline B over the long window and judge the candidate."""
    long_start = long_window_start(store, start, end, long_sessions)
    panels = load_panels(store, end, history_days=(end - long_start).days + HISTORY_DAYS)
    universe = membership(store)  # point-in-time CSI 300 members, as `oomrl replay` uses them
    benchmark = returns_from_levels(store.read_index("000300")).rename("benchmark")
    shared = {
        "strategy": strategy,
        "panels": panels,
        "universe": universe,
        "benchmark": benchmark,
        "rebalance": constraints.rebalance or "daily",
        "start": long_start,
        "end": end,
        "rules": rules,
        "initial_cash": initial_cash,
        "settings": settings,
        "alert_start": start,
    }
    calls = [
        {"label": "active", "root": active_root, "sha": active_sha, **shared},
        {
            "label": "candidate",
            "root": candidate_root,
            "sha": candidate_sha,
            **shared,
            "fresh_decisions": FRESH_DECISIONS,
            "probes": True,
        },
    ]
    if baseline is not None:
        calls.append({"label": "baseline", "root": baseline[0], "sha": baseline[1], **shared})
    rows = [row for rows in mapper(calls) for row in rows]
    long_rows = [r for r in rows if r.window == "long"]
    ranking = [r.version for r in sorted(long_rows, key=lambda r: r.reward, reverse=True)]
    result = CrossValidation(
        start=start,
        end=end,
        rows=rows,
        checks=checks_for(rows, constraints, rule),
        long_start=long_start,
        rule=rule,
        ranking=ranking,
    )
    if run_dir is not None:
        result.write(run_dir)
    return result


__all__ = [
    "DEFAULT_RULE",
    "Check",
    "CrossValidation",
    "PromotionRule",
    "after_halt",
    "promoted_to",
    "VersionMeasures",
    "baseline_of",
    "checks_for",
    "cross_validate",
    "measure",
    "not_worse",
    "period_key",
    "replay_version",
    "run_in_process",
    "stateful_check",
    "window_for",
]


VERSIONS = ("candidate", "active", "baseline")
WINDOWS = ("alert", "long")
# The measures of one replay over one window, a row each. The columns are the versions.
# Labels are short enough that a row fits the Prefect UI.
# Its tables never wrap a cell (708 px of a 1280-px window).
MEASURE_ROWS: Columns = (
    ("sha", "commit", "short"),
    ("first", "from", "date"),
    ("last", "to", "date"),
    ("trading_days", "sessions", "{:,.0f}"),
    ("net_return", "net return (%)", "pct2"),
    ("information_ratio", "IR vs CSI 300", "{:.2f}"),
    ("reward", "reward Σ (Eq. 1-2)", "{:+.4f}"),
    ("max_drawdown", "max drawdown (%)", "pct2"),
    ("turnover", "turnover (× NAV)", "{:.2f}"),
    ("costs_fraction", "costs (% of capital)", "pct2"),
    ("rebalances", "rebalances", "{:,.0f}"),
    ("max_rebalances_per_period", "max rebalances a period", "{:,.0f}"),
    ("max_adv_participation", "max ADV part. (%)", "pct3"),
    ("max_weekly_turnover", "max weekly turnover (× NAV)", "{:.3f}"),
    ("max_position_weight", "max weight (% of NAV)", "pct2"),
    ("halted_on", "halted on", None),
)


def _measures(row: VersionMeasures) -> dict[str, Any]:
    values = row.model_dump(exclude={"dates", "returns"})
    return {
        **values,
        "first": row.dates[0] if row.dates else None,
        "last": row.dates[-1] if row.dates else None,
    }


def crossval_rows(cross: CrossValidation) -> list[dict[str, str]]:
    """The evidence as a table: a row per window and measure, a column per version.

    Each window's rows start with its dates. So two `active` rows never look alike. The table stays
    narrow.
    """
    by = {(r.version, r.window): _measures(r) for r in cross.rows}
    versions = [v for v in VERSIONS if any(version == v for version, _ in by)]
    return [
        {
            "window": window,
            "measure": title,
            **{
                v: cell_text(by[(v, window)].get(key), style) if (v, window) in by else "—"
                for v in versions
            },
        }
        for window in WINDOWS
        if any(w == window for _, w in by)
        for key, title, style in MEASURE_ROWS
    ]


def crossval_markdown(cross: CrossValidation, image_url: str | None = None) -> str:
    """The decision: verdict, windows, tolerance, the evidence chart, the measures and every
    check."""
    verdict = "PROMOTE" if cross.passed else "REFUSE"
    lines = [
        f"# Cross-validation: {verdict}",
        "",
        f"- alert window: {cross.start} .. {cross.end}",
        f"- long window: {cross.long_start or cross.start} .. {cross.end}",
        (
            "- promotion rule, net of friction on the paired daily return difference "
            "(annualized): "
            f"{cross.rule.describe()}"
        ),
        "- ranking by total reward (Eq. 1-2) over the long window: "
        f"{', '.join(cross.ranking) or '—'}",
        "",
    ]
    if image_url:
        lines += [f"![Cumulative return of each version over the long window]({image_url})", ""]
    rows = crossval_rows(cross)
    lines += [
        "## Measures",
        "",
        markdown_table(rows, set(rows[0]) - {"window", "measure"}),
        "",
        "## Checks",
        "",
    ]
    # A list, not a table: a check's numbers are a sentence. The UI's table cells never wrap.
    lines += [
        f"- **{c.name}**: {'passed' if c.passed else 'FAILED'} — {c.detail}" for c in cross.checks
    ]
    return "\n".join(lines if cross.checks else [*lines, "(no check)"]) + "\n"
