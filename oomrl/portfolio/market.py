"""Market arrays the broker needs, computed once per panel: fill prices, limit flags, ADV, volatility."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from oomrl.errors import DataValidationError
from oomrl.market import boards
from oomrl.market.rules import AShareRules, FillPrice, cents_array

PANEL_FIELDS = ("open", "high", "low", "close", "volume", "amount", "prev_close_raw")
STRATEGY_FIELDS = ("open", "high", "low", "close", "volume", "amount")
# Prices this close to a computed limit are re-checked with the exact Decimal rule of boards.
NEAR_LIMIT = 0.02


def panels_from_bars(bars: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Pivot long bars (BAR_COLUMNS) into date x symbol panels, one per field."""
    missing = {"date", "symbol", "close"} - set(bars.columns)
    if missing:
        raise DataValidationError(f"bars lack columns {sorted(missing)}")
    if bars.duplicated(["date", "symbol"]).any():
        raise DataValidationError("bars hold duplicate (date, symbol) rows")
    frame = bars.assign(date=pd.to_datetime(bars["date"]).dt.normalize())
    panels: dict[str, pd.DataFrame] = {}
    for field in PANEL_FIELDS:
        if field in frame.columns:
            panel = frame.pivot(index="date", columns="symbol", values=field).sort_index()
            panels[field] = panel.astype(float)
    return panels


@dataclass
class MarketFrames:
    """Aligned (T x N) arrays of one market; index t is a session, column i a symbol."""

    dates: pd.DatetimeIndex
    symbols: pd.Index
    panels: dict[str, pd.DataFrame]
    close: np.ndarray
    last_close: np.ndarray  # close carried forward over suspensions (valuation)
    tradable: np.ndarray
    fill_price: np.ndarray
    limit_up: np.ndarray  # limit prices on the panel's price basis
    limit_down: np.ndarray
    at_limit_up: np.ndarray
    at_limit_down: np.ndarray
    adv: np.ndarray  # mean traded value (CNY) of the `adv_window` sessions before t
    sigma: np.ndarray  # std of daily returns over the `sigma_window` sessions before t

    @classmethod
    def build(cls, panels: Mapping[str, pd.DataFrame], rules: AShareRules,
              st_symbols: Iterable[str] = (), limit_pct: Mapping[str, float] | None = None
              ) -> MarketFrames:
        """Align the panels and precompute every per-cell quantity the broker and replay use."""
        if "close" not in panels:
            raise DataValidationError("market panels need a 'close' panel")
        close_df = panels["close"].sort_index()
        dates, symbols = pd.DatetimeIndex(close_df.index), close_df.columns
        aligned = {f: p.reindex(index=dates, columns=symbols).astype(float) for f, p in panels.items()}
        close = aligned["close"].to_numpy()
        if np.any(close[np.isfinite(close)] <= 0):
            raise DataValidationError("close prices must be positive")
        volume = aligned.get("volume", pd.DataFrame(np.nan, dates, symbols)).to_numpy()
        tradable = np.isfinite(close) & ~(np.isfinite(volume) & (volume <= 0))
        last_close_df = aligned["close"].ffill()
        last_close = last_close_df.to_numpy()
        prev_close = last_close_df.shift(1).to_numpy()
        fill = _fill_prices(aligned, rules.fill_price)
        pct = _limit_pcts(symbols, set(st_symbols), limit_pct)
        exact = np.array([limit_pct is None or s not in limit_pct for s in symbols], dtype=bool)
        up, down, at_up, at_down = _limits(aligned, prev_close, fill, pct, exact, symbols,
                                           set(st_symbols))
        traded_value = aligned["close"] * aligned.get("volume", np.nan)
        if "amount" in aligned:
            traded_value = aligned["amount"].fillna(traded_value)
        window = rules.adv_window
        adv = traded_value.rolling(window, min_periods=min(5, window)).mean().shift(1).to_numpy()
        returns = last_close_df.pct_change(fill_method=None)
        sigma = returns.rolling(rules.sigma_window, min_periods=2).std().shift(1).to_numpy()
        strategy_panels = {f: aligned[f] for f in STRATEGY_FIELDS if f in aligned}
        return cls(dates, symbols, strategy_panels, close, last_close, tradable, fill,
                   up, down, at_up & rules.price_limits, at_down & rules.price_limits, adv, sigma)

    def index_of(self, day: pd.Timestamp) -> int:
        """Row of a session date; KeyError when the market has no row for it."""
        stamp = pd.Timestamp(day).normalize()
        position = self.dates.searchsorted(stamp)
        if position >= len(self.dates) or self.dates[position] != stamp:
            raise KeyError(f"no market data on {stamp.date()}")
        return int(position)


def _fill_prices(aligned: Mapping[str, pd.DataFrame], policy: FillPrice) -> np.ndarray:
    """Frictionless fill price per cell under the configured policy."""
    close = aligned["close"]
    if policy is FillPrice.CLOSE:
        return close.to_numpy()
    if policy is FillPrice.OPEN:
        return aligned.get("open", close).fillna(close).to_numpy()
    high = aligned.get("high", close).fillna(close)
    low = aligned.get("low", close).fillna(close)
    typical = (high + low + close) / 3.0
    if "amount" in aligned and "volume" in aligned:
        vwap = aligned["amount"] / aligned["volume"].where(aligned["volume"] > 0)
        # amount may be on another price basis than adjusted prices: trust it only inside the range.
        inside = (vwap >= low * 0.999) & (vwap <= high * 1.001)
        typical = vwap.where(inside, typical)
    return typical.to_numpy()


def _limit_pcts(symbols: pd.Index, st: set[str], override: Mapping[str, float] | None) -> np.ndarray:
    """Price-limit fraction per symbol from its board (or an explicit override)."""
    pcts = []
    for symbol in symbols:
        if override is not None and symbol in override:
            pcts.append(float(override[symbol]))
            continue
        try:
            pcts.append(boards.price_limit_pct(symbol, symbol in st))
        except ValueError as exc:
            raise DataValidationError(f"cannot tell the price limit of {symbol!r}: {exc}") from exc
    return np.asarray(pcts, dtype=float)


def _limits(aligned: Mapping[str, pd.DataFrame], prev_close: np.ndarray, fill: np.ndarray,
            pct: np.ndarray, exact: np.ndarray, symbols: pd.Index, st: set[str]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Limit prices on the panel basis and whether the fill price sits at limit-up / limit-down."""
    raw_prev = aligned["prev_close_raw"].to_numpy() if "prev_close_raw" in aligned else prev_close
    raw_prev = np.where(np.isfinite(raw_prev) & (raw_prev > 0), raw_prev, prev_close)
    # Limits are set on unadjusted prices; `scale` maps the panel's (maybe adjusted) basis to raw.
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = raw_prev / prev_close
        up_raw = cents_array(raw_prev * (1 + pct))
        down_raw = cents_array(raw_prev * (1 - pct))
        fill_raw = np.round(fill * scale, 2)
        near = np.isfinite(fill_raw) & ((np.abs(fill_raw - up_raw) < NEAR_LIMIT)
                                        | (np.abs(fill_raw - down_raw) < NEAR_LIMIT)) & exact
    for t, i in zip(*np.nonzero(near)):
        down_raw[t, i], up_raw[t, i] = boards.limit_prices(float(raw_prev[t, i]), symbols[i],
                                                          symbols[i] in st)
    with np.errstate(invalid="ignore"):
        at_up = fill_raw >= up_raw - 1e-9
        at_down = fill_raw <= down_raw + 1e-9
        return up_raw / scale, down_raw / scale, at_up, at_down
