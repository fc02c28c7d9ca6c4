"""Attribution of an account against the CSI 300: reads the ledger and the market store.

It writes the report. The pure work lives in performance, factors and tearsheet. This module only
fetches their inputs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from oomrl.data.schema import BENCHMARK_CODE
from oomrl.errors import MetricsInputError
from oomrl.metrics.factors import (
    FACTOR_NAMES,
    LOOKBACK,
    StyleAttribution,
    style_attribution,
    style_factor_returns,
    traded_value,
)
from oomrl.metrics.friction import account_friction
from oomrl.metrics.io import returns_from_levels, validate_returns
from oomrl.metrics.marks import Mark, alert_marks, probation_marks, promotion_marks, repair_marks
from oomrl.metrics.performance import Phase, phases_from_versions
from oomrl.metrics.report import Report, ReportInputs
from oomrl.metrics.tearsheet import write_report

BENCHMARK_KINDS = ("price", "total_return")


class NavSource(Protocol):
    """The part of the ledger attribution reads."""

    def nav_frame(self, account: str) -> pd.DataFrame: ...

    def fills_frame(self, account: str) -> pd.DataFrame: ...

    def alerts(self, account: str) -> list[dict[str, Any]]: ...

    def version_names(self, account: str) -> dict[str, str]: ...

    def probations(self, account: str | None = None) -> list[dict[str, Any]]: ...


class IndexSource(Protocol):
    """The part of the market store attribution reads."""

    def read_index(self, code: str = ..., kind: str = ...) -> pd.Series: ...

    def read_panel(
        self, field: str, start: Any = ..., end: Any = ..., symbols: Any = ...
    ) -> pd.DataFrame: ...

    def read_membership(self) -> pd.DataFrame: ...


class VersionLabels(Protocol):
    """The part of the workspace's versions a report reads (the caller opens them: git)."""

    def labels(self, names: dict[str, str] | None = None) -> dict[str, str]: ...


def account_returns(nav: pd.DataFrame, account: str) -> tuple[pd.Series, pd.Series]:
    """Realized daily returns and the strategy version live on each date, from a nav_frame."""
    if nav.empty:
        raise MetricsInputError(f"account {account!r} has no NAV history in the ledger")
    frame = nav.assign(date=pd.to_datetime(nav["date"])).set_index("date").sort_index()
    returns = validate_returns(
        frame["realized_return"].astype(float).rename(account), f"account {account}"
    )
    versions = frame.get("strategy_version", pd.Series(index=frame.index, dtype=object))
    return returns, versions.reindex(returns.index)


def version_rewards(nav: pd.DataFrame, phases: list[Phase]) -> dict[str, float]:
    """The paper's reward (Eq. 1-2) summed per phase (strategy version), from the ledger's NAV
    rows."""
    dates = pd.to_datetime(nav["date"])
    return {
        phase.name: float(nav.loc[(dates >= phase.start) & (dates <= phase.end), "reward"].sum())
        for phase in phases
    }


def benchmark_returns(
    store: IndexSource, kind: str = "price", code: str = BENCHMARK_CODE
) -> pd.Series:
    """Daily returns of the CSI 300 price or total-return index held in the store."""
    if kind not in BENCHMARK_KINDS:
        raise MetricsInputError(
            f"benchmark must be one of {', '.join(BENCHMARK_KINDS)}, got {kind!r}"
        )
    levels = store.read_index(code, kind=kind)
    if levels.empty:
        raise MetricsInputError(
            f"the market store has no {kind} levels for index {code}: run `oomrl ingest`"
        )
    return returns_from_levels(levels, f"CSI 300 {kind} index")


def universe_panel(
    membership: pd.DataFrame, dates: pd.DatetimeIndex, symbols: pd.Index
) -> pd.DataFrame:
    """True where a symbol is an index member on a date: the latest snapshot on or before it."""
    flags = pd.DataFrame(False, index=dates, columns=symbols)
    snapshots = membership.groupby(pd.to_datetime(membership["effective_date"]))["symbol"].apply(
        set
    )
    for start, members in snapshots.sort_index().items():
        rows = dates >= start
        flags.loc[rows] = flags.columns.isin(list(members))[None, :].repeat(int(rows.sum()), axis=0)
    return flags


def store_style_factors(store: IndexSource, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """High-Low factor returns over the point-in-time CSI 300 universe from the stored bars."""
    warm = start - pd.Timedelta(days=3 * LOOKBACK)
    close = store.read_panel("close", warm, end)
    if close.empty:
        raise MetricsInputError("the market store has no bars for the style factors")
    value = traded_value(
        close, store.read_panel("volume", warm, end), store.read_panel("amount", warm, end)
    )
    membership = store.read_membership()
    universe = universe_panel(membership, close.index, close.columns) if len(membership) else None
    return style_factor_returns(close, value, universe).loc[start:end]


def account_attribution(
    returns: pd.Series, benchmark: pd.Series, store: IndexSource, rf: float = 0.0
) -> tuple[StyleAttribution | None, str | None]:
    """Style attribution, or None and the reason when the store cannot support it.

    The report says so."""
    try:
        styles = store_style_factors(store, returns.index[0], returns.index[-1])
        return style_attribution(returns, benchmark, styles[list(FACTOR_NAMES)], rf), None
    except MetricsInputError as exc:
        return None, f"Style attribution unavailable: {exc}"


def report_dir(runs_dir: Path, label: str) -> Path:
    """A fresh folder for one report under OOMRL_HOME/runs."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
    return runs_dir / f"report-{safe}-{stamp}"


def version_labels(
    ledger: NavSource, account: str, workspace: VersionLabels | None
) -> dict[str, str]:
    """Full SHA -> "v2 daily_momentum", from the workspace tags and the ledger's strategy names.

    A version the workspace does not know keeps its short SHA."""
    names = ledger.version_names(account)
    return workspace.labels(names) if workspace is not None else {}


def labelled(versions: pd.Series, labels: dict[str, str]) -> pd.Series:
    """The live version of each date under its label. Unknown versions: the first 12 hex digits."""
    return versions.map(lambda sha: sha if pd.isna(sha) else labels.get(str(sha), str(sha)[:12]))


def account_marks(
    ledger: NavSource,
    account: str,
    versions: pd.Series,
    labels: dict[str, str],
    runs_dir: Path | None,
) -> list[Mark]:
    """Alerts and probations (ledger), repairs (run folders) and promotions.

    A promotion is the first session of each new version."""
    marks = (
        alert_marks(ledger.alerts(account))
        + probation_marks(ledger.probations(account))
        + promotion_marks(versions, labels)
    )
    return marks + (repair_marks(runs_dir, account) if runs_dir is not None else [])


def account_report(
    ledger: NavSource,
    store: IndexSource,
    account: str,
    out_dir: Path,
    *,
    phases: list[Phase] | None = None,
    benchmark_kind: str = "price",
    rf: float = 0.0,
    workspace: VersionLabels | None = None,
    runs_dir: Path | None = None,
) -> Report:
    """The report of one account: metrics vs the CSI 300, phases, friction, marks, style table.

    Phases are versions unless given. Friction comes from the ledger. Alerts, repairs, probations
    and promotions are marked."""
    nav = ledger.nav_frame(account)
    returns, versions = account_returns(nav, account)
    benchmark = benchmark_returns(store, benchmark_kind)
    labels = version_labels(ledger, account, workspace)
    live_phases = (
        phases
        if phases is not None
        else (phases_from_versions(labelled(versions, labels), width=None) or None)
    )
    attribution, note = account_attribution(returns, benchmark.loc[: returns.index[-1]], store, rf)
    friction_phases = live_phases or [Phase("whole window", returns.index[0], returns.index[-1])]
    inputs = ReportInputs(
        title=f"Account {account}",
        benchmark_kind=benchmark_kind,
        rf=rf,
        phases=live_phases,
        attribution=attribution,
        friction=account_friction(nav, ledger.fills_frame(account), friction_phases),
        marks=account_marks(ledger, account, versions, labels, runs_dir),
        notes=[text for text in (note, alignment_cost_note(ledger, account, nav)) if text],
    )
    return write_report(returns, benchmark, out_dir, inputs)


def alignment_cost_note(ledger: object, account: str, nav: pd.DataFrame) -> str | None:
    """The cost of alignment (the model calls of the account's repairs) beside its trading PnL."""
    from oomrl.portfolio.budget_tables import read_cost_of_alignment

    cost = read_cost_of_alignment(ledger, account) if hasattr(ledger, "engine") else None
    if cost is None:
        return None
    first = nav.iloc[0]
    start = float(first["nav"]) / (1.0 + float(first["realized_return"]))
    pnl = float(nav["nav"].iloc[-1]) - start
    costs = float(nav["costs"].sum()) if "costs" in nav else 0.0
    return (
        f"Cost of alignment: {cost.repairs} repair(s), {cost.calls} model call(s), "
        f"{cost.tokens:,} tokens, ${cost.cost_usd:.4f} (LLM budget left: "
        f"{cost.tokens_left:,} tokens, ${cost.usd_left:.4f}); trading PnL over the "
        f"account's history: {pnl:+,.0f} CNY after {costs:,.0f} CNY of trading costs."
    )
