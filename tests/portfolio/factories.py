"""Small hand-made markets for portfolio tests (bars in the BAR_COLUMNS schema, pivoted to
panels)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from oomrl.data.schema import BAR_COLUMNS
from oomrl.portfolio.market import panels_from_bars


def flat_bars(
    symbols: list[str],
    days: int = 30,
    price: float = 10.0,
    volume: float = 1e6,
    start: str = "2024-06-03",
) -> pd.DataFrame:
    """Bars at a constant price (no volatility, so impact is the half-spread alone)."""
    dates = pd.bdate_range(start, periods=days)
    rows = [
        {
            "date": d,
            "symbol": s,
            "open": price,
            "high": price,
            "low": price,
            "close": price,
            "volume": volume,
            "amount": price * volume,
            "adjustment": "none",
            "prev_close_raw": price,
        }
        for d in dates
        for s in symbols
    ]
    return pd.DataFrame(rows, columns=list(BAR_COLUMNS))


def flat_panels(
    symbols: list[str],
    days: int = 30,
    price: float = 10.0,
    volume: float = 1e6,
    start: str = "2024-06-03",
) -> dict[str, pd.DataFrame]:
    """Panels of `flat_bars`."""
    return panels_from_bars(flat_bars(symbols, days, price, volume, start))


def random_panels(
    symbols: list[str],
    days: int = 120,
    seed: int = 0,
    start: str = "2024-01-02",
    volume: float = 5e6,
) -> dict[str, pd.DataFrame]:
    """Random-walk panels (2 % daily volatility) with OHLC around the close."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range(start, periods=days)
    close = pd.DataFrame(
        20 * np.exp(np.cumsum(rng.normal(0.0003, 0.02, (days, len(symbols))), 0)), dates, symbols
    ).round(2)
    open_ = close.shift(1).fillna(close) * (1 + rng.normal(0, 0.003, close.shape))
    high = np.maximum(close, open_) * 1.005
    low = np.minimum(close, open_) * 0.995
    vol = pd.DataFrame(rng.uniform(0.5, 1.5, close.shape) * volume, dates, symbols)
    return {
        "open": open_.round(2),
        "high": high.round(2),
        "low": low.round(2),
        "close": close,
        "volume": vol,
        "amount": vol * (high + low + close) / 3,
    }


def set_cell(panels: dict[str, pd.DataFrame], day: int, symbol: str, **values: float) -> None:
    """Overwrite fields of one (day, symbol) cell, e.g. a gap up to the limit."""
    for field, value in values.items():
        panels[field].iloc[day, panels[field].columns.get_loc(symbol)] = value
