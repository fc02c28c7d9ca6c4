"""A seeded synthetic market for scale tests: fat-tailed returns, board price limits, suspensions,
realistic volume."""

from __future__ import annotations

from datetime import date
from functools import cached_property
from typing import cast

import numpy as np
import pandas as pd

from oomrl.data.schema import conform_bars, empty_bars
from oomrl.market.boards import to_symbol
from oomrl.market.calendar import sessions
from oomrl.market.limits import price_limit_pct

MARKET_VOL = 0.012  # daily sigma of the common factor (CSI 300 is ~1.2 %/day)
DIVIDEND_YIELD = 0.02  # annual, the gap between the price and total-return index
SUSPENSION_RATE = 0.002  # chance a suspension starts on a given day
BOARD_SHARE = ((0.70, "main"), (0.20, "chinext"), (0.10, "star"))
SAMPLE_END = "2026-02-27"
# The codes its boards hold stay valid up to here (600000+, 000001+, 300001+, 688001+)
MAX_SYMBOLS = 5000
MAX_DAYS = 5000


def synthetic_symbols(count: int) -> list[str]:
    """Deterministic codes: 70 % main board (SH 600000+, SZ 000001+), 20 % ChiNext (300001+), 10 %
    STAR (688001+)."""
    main, chinext = int(count * BOARD_SHARE[0][0]), int(count * BOARD_SHARE[1][0])
    star = count - main - chinext
    codes = [f"{600000 + i:06d}" if i % 2 == 0 else f"{1 + i:06d}" for i in range(main)]
    codes += [f"{300001 + i:06d}" for i in range(chinext)]
    codes += [f"{688001 + i:06d}" for i in range(star)]
    return [to_symbol(code) for code in codes]


class SyntheticSource:
    """Every series is a pure function of (seed, symbol position), so any symbol can be fetched
    alone."""

    name = "synthetic"
    live = False

    def __init__(
        self, symbols: int = 300, start: str = "2016-01-04", days: int | None = None, seed: int = 7
    ) -> None:
        if not 1 <= symbols <= MAX_SYMBOLS:
            raise ValueError(f"the synthetic source has 1 to {MAX_SYMBOLS} symbols, not {symbols}")
        if days is not None and not 1 <= days <= MAX_DAYS:
            raise ValueError(f"the synthetic source has 1 to {MAX_DAYS} sessions, not {days}")
        self.seed = seed
        dates = (
            sessions(start, SAMPLE_END) if days is None else sessions(start, "2026-12-31")[:days]
        )
        self.dates = dates
        self._symbols = synthetic_symbols(symbols)
        self._position = {sym: i for i, sym in enumerate(self._symbols)}

    def symbols(self) -> list[str]:
        return list(self._symbols)

    def coverage(self) -> tuple[date, date]:
        return self.dates[0].date(), self.dates[-1].date()

    @cached_property
    def _market(self) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 0])
        return cast(
            np.ndarray, rng.standard_t(4, len(self.dates)) * MARKET_VOL / np.sqrt(2.0) + 0.0003
        )

    def _series(self, symbol: str) -> pd.DataFrame:
        rng = np.random.default_rng([self.seed, 1 + self._position[symbol]])
        n, pct = len(self.dates), price_limit_pct(symbol)
        beta, vol = rng.uniform(0.6, 1.4), rng.uniform(0.012, 0.035)
        # + vol^2/2 offsets volatility drag, so prices neither drift to pennies nor explode over 10
        # years.
        ret = beta * self._market + rng.standard_t(3, n) * vol / np.sqrt(3.0) + vol**2 / 2
        suspended = np.zeros(n, dtype=bool)
        for begin in np.flatnonzero(rng.random(n) < SUSPENSION_RATE):
            suspended[begin : begin + rng.integers(1, 10)] = True
        # Limit-up/-down days happen in the tails
        ret = np.clip(np.where(suspended, 0.0, ret), -pct, pct)
        close = np.round(rng.uniform(3, 200) * np.cumprod(1 + ret), 2)
        close = np.maximum(close, 0.01)
        prev = np.concatenate([[close[0] / (1 + ret[0])], close[:-1]])
        band_lo, band_hi = prev * (1 - pct), prev * (1 + pct)
        opened = np.clip(prev * (1 + rng.normal(0, vol / 3, n)), band_lo, band_hi)
        top = np.maximum(opened, close) * (1 + np.abs(rng.normal(0, vol / 2, n)))
        bottom = np.minimum(opened, close) * (1 - np.abs(rng.normal(0, vol / 2, n)))
        high = np.round(np.minimum(top, band_hi), 2)
        low = np.round(np.maximum(bottom, band_lo), 2)
        opened = np.clip(np.round(opened, 2), low, high)
        high, low = np.maximum(high, close), np.minimum(low, close)
        volume = np.round(
            rng.lognormal(np.log(2e7 / close[0] * 10), 0.5, n) * (1 + 5 * np.abs(ret)), -2
        )
        frame = pd.DataFrame(
            {
                "date": self.dates,
                "symbol": symbol,
                "open": opened,
                "high": high,
                "low": low,
                "close": close,
                "volume": volume,
                "amount": np.round(volume * (high + low + close) / 3, 2),
                "adjustment": "none",
                "prev_close_raw": np.round(prev, 2),
            }
        )
        frame.loc[0, "prev_close_raw"] = np.nan
        return frame.loc[~suspended]

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        if symbol not in self._position:
            return empty_bars()
        frame = self._series(symbol)
        inside = (frame["date"] >= pd.Timestamp(start)) & (frame["date"] <= pd.Timestamp(end))
        return conform_bars(frame.loc[inside])

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        carry = DIVIDEND_YIELD / 252 if kind == "total_return" else 0.0
        level = 3000.0 * np.cumprod(1 + self._market + carry)
        frame = pd.DataFrame(
            {"date": self.dates, "code": code, "close": np.round(level, 4), "kind": kind}
        )
        inside = (frame["date"] >= pd.Timestamp(start)) & (frame["date"] <= pd.Timestamp(end))
        return frame.loc[inside].reset_index(drop=True)

    def membership(self) -> pd.DataFrame:
        """The first 300 symbols are the index, from the first session."""
        members = self._symbols[:300]
        return pd.DataFrame({"effective_date": self.dates[0], "symbol": members, "name": ""})
