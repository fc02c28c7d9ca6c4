"""The Strategy protocol and the MarketView it sees: panels truncated at the decision date."""

from __future__ import annotations

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


class MarketView:
    """Daily panels (date x symbol) cut at `as_of`: rows after the decision date are never stored."""

    def __init__(self, panels: Mapping[str, pd.DataFrame], as_of: date | pd.Timestamp,
                 portfolio_value: float = 1.0, members: Iterable[str] | None = None) -> None:
        if "close" not in panels:
            raise ValueError("a MarketView needs at least a 'close' panel")
        unknown = set(panels) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown panel fields {sorted(unknown)}; allowed: {FIELDS}")
        self._as_of = pd.Timestamp(as_of).normalize()
        # Slicing here, once, is what makes look-ahead impossible through this object.
        self._panels = dict(panels)
        # Rows visible per panel; every accessor slices to them, so later rows are unreachable.
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
        return self._get(field).iloc[-rows:].copy()

    def _get(self, field: str) -> pd.DataFrame:
        if field not in self._panels:
            raise KeyError(f"no {field!r} panel in this view; available: {self.fields}")
        return self._panels[field].iloc[: self._rows[field]]

    def universe(self) -> list[str]:
        """Index members (when known) with a close on the decision date (traded that day)."""
        close = self._get("close")
        if close.empty or close.index[-1] != self._as_of:
            return []
        last = close.iloc[-1]
        traded = last.index[last.notna()]
        if self._members is not None:
            traded = traded[traded.isin(self._members)]
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
    close = view.history("close", lookback + skip + 1)
    if len(close) < lookback + skip + 1:
        return pd.Series(dtype=float)
    end = close.iloc[-1 - skip].to_numpy(dtype=float)
    start = close.iloc[0].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = pd.Series(end / start - 1.0, index=close.columns)
    return change[np.isfinite(change.to_numpy())]


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
        if not np.isfinite(weight) or weight < -WEIGHT_TOLERANCE:
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
