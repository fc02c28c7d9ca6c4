"""Attribution of an account against the CSI 300: reads the ledger and the market store, writes the report.

The pure work lives in performance, factors and tearsheet; this module only fetches their inputs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from oomrl.data.schema import BENCHMARK_CODE
from oomrl.metrics.factors import (
    FACTOR_NAMES,
    LOOKBACK,
    StyleAttribution,
    style_attribution,
    style_factor_returns,
    traded_value,
)
from oomrl.metrics.io import MetricsInputError, returns_from_levels, validate_returns
from oomrl.metrics.performance import Phase, phases_from_versions
from oomrl.metrics.tearsheet import Report, build_report

BENCHMARK_KINDS = ("price", "total_return")


class NavSource(Protocol):
    """The part of the ledger attribution reads."""

    def nav_frame(self, account: str) -> pd.DataFrame: ...


class IndexSource(Protocol):
    """The part of the market store attribution reads."""

    def read_index(self, code: str = ..., kind: str = ...) -> pd.Series: ...

    def read_panel(self, field: str, start: Any = ..., end: Any = ..., symbols: Any = ...) -> pd.DataFrame: ...

    def read_membership(self) -> pd.DataFrame: ...


def account_returns(nav: pd.DataFrame, account: str) -> tuple[pd.Series, pd.Series]:
    """Realized daily returns and the strategy version live on each date, from a nav_frame."""
    if nav.empty:
        raise MetricsInputError(f"account {account!r} has no NAV history in the ledger")
    frame = nav.assign(date=pd.to_datetime(nav["date"])).set_index("date").sort_index()
    returns = validate_returns(frame["realized_return"].astype(float).rename(account), f"account {account}")
    versions = frame.get("strategy_version", pd.Series(index=frame.index, dtype=object))
    return returns, versions.reindex(returns.index)


def benchmark_returns(store: IndexSource, kind: str = "price", code: str = BENCHMARK_CODE) -> pd.Series:
    """Daily returns of the CSI 300 price or total-return index held in the store."""
    if kind not in BENCHMARK_KINDS:
        raise MetricsInputError(f"benchmark must be one of {', '.join(BENCHMARK_KINDS)}, got {kind!r}")
    levels = store.read_index(code, kind=kind)
    if levels.empty:
        raise MetricsInputError(f"the market store has no {kind} levels for index {code}: run `oomrl ingest`")
    return returns_from_levels(levels, f"CSI 300 {kind} index")


def universe_panel(membership: pd.DataFrame, dates: pd.DatetimeIndex, symbols: pd.Index) -> pd.DataFrame:
    """True where a symbol is an index member on a date (the latest snapshot on or before it)."""
    flags = pd.DataFrame(False, index=dates, columns=symbols)
    snapshots = membership.groupby(pd.to_datetime(membership["effective_date"]))["symbol"].apply(set)
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
    value = traded_value(close, store.read_panel("volume", warm, end), store.read_panel("amount", warm, end))
    membership = store.read_membership()
    universe = universe_panel(membership, close.index, close.columns) if len(membership) else None
    return style_factor_returns(close, value, universe).loc[start:end]


def account_attribution(returns: pd.Series, benchmark: pd.Series, store: IndexSource,
                        rf: float = 0.0) -> tuple[StyleAttribution | None, str | None]:
    """Style attribution, or None and the reason when the store cannot support it (the report says so)."""
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


def account_report(ledger: NavSource, store: IndexSource, account: str, out_dir: Path, *,
                   phases: list[Phase] | None = None, benchmark_kind: str = "price",
                   rf: float = 0.0) -> Report:
    """The report of one account: metrics vs the CSI 300, phases (versions unless given), style table."""
    returns, versions = account_returns(ledger.nav_frame(account), account)
    benchmark = benchmark_returns(store, benchmark_kind)
    live_phases = phases if phases is not None else (phases_from_versions(versions) or None)
    attribution, note = account_attribution(returns, benchmark.loc[: returns.index[-1]], store, rf)
    return build_report(returns, out_dir, benchmark=benchmark, benchmark_kind=benchmark_kind,
                        phases=live_phases, title=f"Account {account}", rf=rf, attribution=attribution,
                        notes=[note] if note else None)
