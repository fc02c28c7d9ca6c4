"""The Strategy protocol and the MarketView it sees: panels truncated at the decision date."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date
from typing import ClassVar, Protocol

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

FIELDS = ("open", "high", "low", "close", "volume", "amount")
WEIGHT_TOLERANCE = 1e-9


class StrategyParams(BaseModel):
    """Base of every strategy's parameters: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Panels(dict):  # type: ignore[type-arg]
    """Panels aligned to one date index and one symbol order (a replay's), with their arrays read once.

    A MarketView over them finds its visible rows with one search instead of one per panel, and the
    helpers below read rows as arrays instead of building frames.
    """

    def __init__(self, frames: Mapping[str, pd.DataFrame]) -> None:
        super().__init__(frames)
        first = next(iter(frames.values()))
        self.index, self.columns = first.index, first.columns
        for name, frame in frames.items():
            if not (frame.index.equals(self.index) and frame.columns.equals(self.columns)):
                raise ValueError(f"panel {name!r} is not aligned with the others")
        self.arrays = {name: frame.to_numpy() for name, frame in frames.items()}
        self.names = np.asarray(self.columns, dtype=object)
        self.days = np.asarray(self.index.values, dtype="datetime64[ns]")  # for row searches without pandas
        self.known_fields = not set(frames) - set(FIELDS)

    def visible_rows(self, as_of: pd.Timestamp) -> int:
        """How many rows lie on or before `as_of`."""
        return int(np.searchsorted(self.days, as_of.to_datetime64(), side="right"))


DAY_NS = 86_400_000_000_000


def _midnight(day: date | pd.Timestamp) -> pd.Timestamp:
    """pd.Timestamp(day).normalize(), without the call when `day` is already a naive midnight Timestamp."""
    stamp = pd.Timestamp(day)
    if stamp.tz is None and stamp.unit == "ns" and stamp.value % DAY_NS == 0:
        return stamp
    return stamp.normalize()


class MarketView:
    """Daily panels (date x symbol) cut at `as_of`: rows after the decision date are never stored."""

    def __init__(self, panels: Mapping[str, pd.DataFrame], as_of: date | pd.Timestamp,
                 portfolio_value: float = 1.0, members: Iterable[str] | None = None) -> None:
        if "close" not in panels:
            raise ValueError("a MarketView needs at least a 'close' panel")
        self._shared = panels if isinstance(panels, Panels) else None
        if self._shared is None or not self._shared.known_fields:
            unknown = set(panels) - set(FIELDS)
            if unknown:
                raise ValueError(f"unknown panel fields {sorted(unknown)}; allowed: {FIELDS}")
        self._as_of = _midnight(as_of)
        # Slicing here, once, is what makes look-ahead impossible through this object.
        self._panels = dict(panels)
        # Rows visible per panel; every accessor slices to them, so later rows are unreachable.
        if self._shared is not None:
            self._rows = dict.fromkeys(panels, self._shared.visible_rows(self._as_of))
        else:
            self._rows = {name: int(frame.index.searchsorted(self._as_of, side="right"))
                          for name, frame in panels.items()}
        self.portfolio_value = float(portfolio_value)
        # Index members on the decision date (point in time); None means every symbol with data.
        self._members = None if members is None else frozenset(members)

    @property
    def as_of(self) -> pd.Timestamp:
        """The decision date: the last date whose data the strategy may use."""
        return self._as_of

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the available panels."""
        return tuple(self._panels)

    def panel(self, field: str) -> pd.DataFrame:
        """A copy of the whole truncated panel of one field."""
        return self._get(field).copy()

    def history(self, field: str, rows: int) -> pd.DataFrame:
        """A copy of the last `rows` rows (sessions) of one field, ending at the decision date."""
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        visible = self._visible(field)
        return self._panels[field].iloc[max(visible - rows, 0): visible].copy()

    def _visible(self, field: str) -> int:
        if field not in self._panels:
            raise KeyError(f"no {field!r} panel in this view; available: {self.fields}")
        return self._rows[field]

    def _get(self, field: str) -> pd.DataFrame:
        return self._panels[field].iloc[: self._visible(field)]

    def values(self, field: str) -> np.ndarray:
        """The truncated panel of one field as a read-only float array (rows: sessions, columns: `symbols`)."""
        visible = self._visible(field)
        whole = self._shared.arrays[field] if self._shared is not None else self._panels[field].to_numpy()
        rows = np.asarray(whole[:visible], dtype=float).view()
        rows.flags.writeable = False  # a view of the market's own data: reading only
        return rows

    @property
    def symbols(self) -> pd.Index:
        """The symbols (columns) of the panels, in the order of `values`' columns."""
        return self._shared.columns if self._shared is not None else self._panels["close"].columns

    def universe(self) -> list[str]:
        """Index members (when known) with a close on the decision date (traded that day)."""
        visible = self._visible("close")
        close = self._panels["close"]
        if not visible or close.empty or close.index[visible - 1] != self._as_of:
            return []
        names = self._shared.names if self._shared is not None else np.asarray(close.columns, dtype=object)
        traded = names[~np.isnan(self.values("close")[visible - 1])].tolist()
        if self._members is not None:
            traded = [symbol for symbol in traded if symbol in self._members]
        return sorted(traded)

    def traded_value(self, window: int) -> pd.Series:
        """Average daily traded value (CNY) over the last `window` sessions: amount, else close x volume."""
        close = self.history("close", window)
        if "volume" not in self._panels:
            raise KeyError("traded_value needs a 'volume' panel")
        volume = self.history("volume", window)
        value = close * volume
        if "amount" in self._panels:
            value = self.history("amount", window).fillna(value)
        return value.mean(axis=0, skipna=True)


class Strategy(Protocol):
    """What every strategy offers: a name, a Params model, a schedule and target weights."""

    name: ClassVar[str]
    Params: ClassVar[type[StrategyParams]]

    def rebalance_due(self, day: date, last_rebalance: date | None) -> bool:
        """True when the strategy wants to trade on session `day`."""

    def target_weights(self, view: MarketView, holdings: Mapping[str, float],
                       params: StrategyParams) -> dict[str, float]:
        """Long-only target weights (each >= 0, sum <= 1) from data up to `view.as_of`."""


def momentum(view: MarketView, lookback: int, skip: int = 0) -> pd.Series:
    """Percentage change of close over `lookback` sessions, ending `skip` sessions before as_of."""
    if lookback < 1 or skip < 0:
        raise ValueError(f"need lookback >= 1 and skip >= 0, got {lookback}, {skip}")
    rows = lookback + skip + 1
    close = view.values("close")
    if len(close) < rows:
        return pd.Series(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = close[-1 - skip] / close[-rows] - 1.0
    finite = np.isfinite(change)
    if finite.all():  # the symbols' own index: no filtered copy to build
        return pd.Series(change, index=view.symbols)
    return pd.Series(change[finite], index=view.symbols[finite])


def top_k(scores: pd.Series, k: int, among: Iterable[str] | None = None) -> list[str]:
    """Labels of the k highest scores (NaN never picked; ties keep the order of `among`, else of `scores`).

    The same picks as `scores.reindex(among).dropna().sort_values(ascending=False, kind="stable")
    .index[:k]`, without building the intermediate series.
    """
    if among is None:
        labels, values = scores.index.tolist(), scores.to_numpy(dtype=float)
    else:
        known = dict(zip(scores.index.tolist(), scores.to_numpy(dtype=float).tolist(), strict=True))
        labels = [symbol for symbol in among if symbol in known]
        values = np.array([known[symbol] for symbol in labels], dtype=float)
    kept = ~np.isnan(values)
    if not kept.all():
        labels, values = [s for s, keep in zip(labels, kept, strict=True) if keep], values[kept]
    return [labels[i] for i in np.argsort(-values, kind="stable")[:k]]


def equal_weights(symbols: list[str], gross: float) -> dict[str, float]:
    """Equal weights summing to `gross` over `symbols` (empty when there are none)."""
    if not symbols:
        return {}
    weight = gross / len(symbols)
    return {symbol: weight for symbol in symbols}


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Validate long-only weights (>= 0, finite, sum <= 1) and drop zeros."""
    cleaned: dict[str, float] = {}
    for symbol, weight in weights.items():
        finite = math.isfinite(weight) if isinstance(weight, float) else np.isfinite(weight)
        if not finite or weight < -WEIGHT_TOLERANCE:
            raise ValueError(f"weight of {symbol} must be finite and >= 0, got {weight}")
        if weight > WEIGHT_TOLERANCE:
            cleaned[symbol] = float(weight)
    total = sum(cleaned.values())
    if total > 1.0 + WEIGHT_TOLERANCE:
        raise ValueError(f"weights sum to {total:.6f} > 1 (long-only, no leverage)")
    return cleaned


def iso_week(day: date) -> tuple[int, int]:
    """ISO (year, week) of a date."""
    year, week, _ = pd.Timestamp(day).isocalendar()
    return int(year), int(week)
