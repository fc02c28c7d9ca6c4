"""Markets by exchange: A-shares (board rules) and a generic rule set for other Yahoo tickers (US,
HK, ...).

A symbol's market follows from its spelling. `600519.SH` is an A-share (see boards.to_symbol).
`0700.HK` is Hong Kong; a bare ticker such as `AAPL` is the United States. Another Yahoo suffix
(`.L`, `.T`, ...) names its own market. Each market names its trading calendar
(exchange_calendars) and its rule set. It also names its benchmark index: the code the store keeps
it under and Yahoo's ticker. The generic set has one lot size, a commission with a minimum, and
per-side taxes and fees. It has no price limits and no T+1. The defaults below are overridable per
market from settings (`market_rules = {"us": {"lot_size": 1, ...}}`).

The defaults are documented in docs/portfolio.md. A broker's own schedule should replace them.
- us: lot 1 share; commission 0 (the common zero-commission retail schedule). Sell-side tax
  0.00278 % (SEC Section 31 fee, $27.80 per million); half-spread 2 bp; benchmark ^GSPC (S&P 500).
- hk: lot 100 shares. HKEX board lots are set per stock; override for names with other lots.
  Commission 0.03 % with a HKD 3 minimum. Stamp duty 0.1 % on each side (rate since 2023-11-17).
  Trading fee 0.00565 % + SFC levy 0.0027 % + AFRC levy 0.00015 % = 0.0085 % on each side.
  Half-spread 5 bp; benchmark ^HSI (Hang Seng Index).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np
from pydantic import Field

from oomrl.market import boards
from oomrl.market.rules import AShareRules, FrictionRules


class GenericRules(FrictionRules):
    """Rules of a market without board lots or daily price limits.

    One lot, per-side taxes, no T+1."""

    market: str = "us"
    lot_size: int = Field(1, ge=1)
    buy_tax_rate: float = Field(0.0, ge=0.0)
    sell_tax_rate: float = Field(0.0, ge=0.0)
    price_limits: bool = False
    t_plus_one: bool = False

    def lot_rules(self, symbols: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """One lot size for every symbol (minimum = step)."""
        size = np.full(len(symbols), self.lot_size, dtype=np.int64)
        return size, size.copy()

    def limit_fractions(
        self,
        symbols: Sequence[str],
        dates: np.ndarray,
        st: np.ndarray,
        listing_session: np.ndarray,
        list_dates: np.ndarray,
    ) -> np.ndarray:
        """No daily price limits."""
        return np.full(np.shape(st), np.nan)

    def tax_rates(self, day: date) -> tuple[float, float]:
        return self.buy_tax_rate, self.sell_tax_rate


GENERIC_DEFAULTS: dict[str, dict[str, Any]] = {
    "us": {
        "market": "us",
        "lot_size": 1,
        "commission_rate": 0.0,
        "commission_min": 0.0,
        "sell_tax_rate": 0.0000278,
        "transfer_fee_rate": 0.0,
        "half_spread": 0.0002,
    },
    "hk": {
        "market": "hk",
        "lot_size": 100,
        "commission_rate": 0.0003,
        "commission_min": 3.0,
        "buy_tax_rate": 0.001,
        "sell_tax_rate": 0.001,
        "transfer_fee_rate": 0.0000850,
        "half_spread": 0.0005,
        "tick": 0.001,
    },
    "other": {"market": "other", "lot_size": 1, "commission_rate": 0.0005, "commission_min": 0.0},
}


@dataclass(frozen=True)
class Market:
    """An exchange group with one calendar, one benchmark and one rule set."""

    name: str
    calendar: str | None  # exchange_calendars name; None: sessions are not checked
    benchmark: str | None  # index code in the store (also the Yahoo ticker outside China)
    currency: str

    def rules(self, overrides: Mapping[str, Any] | None = None) -> FrictionRules:
        """The market's rule set with settings overrides applied (a bad override names the
        field)."""
        values = dict(overrides or {})
        if self.name == "cn":
            return AShareRules(**values)
        return GenericRules(
            **{
                **GENERIC_DEFAULTS.get(self.name, GENERIC_DEFAULTS["other"]),
                **values,
                "market": self.name,
            }
        )


MARKETS: dict[str, Market] = {
    "cn": Market("cn", "XSHG", "000300", "CNY"),
    "us": Market("us", "XNYS", "^GSPC", "USD"),
    "hk": Market("hk", "XHKG", "^HSI", "HKD"),
}
# Yahoo suffix -> exchange_calendars name for other exchanges (generic rules, no benchmark).
SUFFIX_CALENDARS = {
    "L": "XLON",
    "T": "XTKS",
    "DE": "XETR",
    "PA": "XPAR",
    "AS": "XAMS",
    "TO": "XTSE",
    "AX": "XASX",
    "SI": "XSES",
    "KS": "XKRX",
    "SW": "XSWX",
    "MI": "XMIL",
    "MC": "XMAD",
}
TICKER = re.compile(r"^\^?[A-Z0-9][A-Z0-9\-=]{0,14}(\.[A-Z]{1,3})?$")


def get_market(name: str) -> Market:
    """A market by name (cn, us, hk); a clear error otherwise."""
    market = MARKETS.get(name.strip().lower())
    if market is None:
        raise ValueError(f"unknown market {name!r}; choose one of {', '.join(sorted(MARKETS))}")
    return market


def market_of(symbol: str) -> Market:
    """The market a canonical symbol trades on (A-share codes, `.HK`, bare US tickers, other
    suffixes)."""
    text = str(symbol)
    if boards.SYMBOL_PATTERN.fullmatch(text):
        return MARKETS["cn"]
    if not TICKER.fullmatch(text):
        raise ValueError(f"not a symbol oomrl can trade: {symbol!r}")
    base, _, suffix = text.partition(".")
    if not suffix and not re.search(r"[A-Z]", base):
        raise ValueError(
            f"not a symbol oomrl can trade: {symbol!r} (A-share codes need .SH/.SZ/.BJ)"
        )
    if suffix == "HK":
        return MARKETS["hk"]
    if not suffix:
        return MARKETS["us"]
    return Market(f"other:{suffix}", SUFFIX_CALENDARS.get(suffix), None, "")


def is_symbol(text: str) -> bool:
    """True when `text` is a canonical symbol of some market."""
    try:
        market_of(text)
    except ValueError:
        return False
    return True


def normalize(text: str, market: str | None = None) -> str:
    """Canonical symbol: A-share codes in any spelling for cn, else Yahoo's ticker.

    cn is the default for digits. `0700.hk` -> `0700.HK`, `aapl` -> `AAPL`, `600519` ->
    `600519.SH`, `600519.SS` -> `600519.SH`.
    """
    raw = str(text).strip()
    name = (market or "").strip().lower()
    if name in ("", "cn"):
        try:
            return boards.to_symbol(raw)
        except ValueError:
            if name == "cn":
                raise
    upper = raw.upper()
    if name == "hk" and upper.isdigit():
        upper = f"{int(upper):04d}.HK"
    market_of(upper)  # raises with the symbol named
    return upper


def market_of_symbols(symbols: Iterable[str]) -> Market:
    """The one market of a set of symbols (cn when empty). A book trades one market at a time."""
    found = {market_of(str(symbol)) for symbol in symbols}
    if len(found) > 1:
        names = ", ".join(sorted(market.name for market in found))
        raise ValueError(f"symbols from several markets in one book: {names}")
    return found.pop() if found else MARKETS["cn"]


def yahoo_ticker(symbol: str) -> str:
    """Yahoo's spelling: Shanghai A-shares as `.SS`, everything else as stored."""
    return symbol.replace(".SH", ".SS") if boards.SYMBOL_PATTERN.fullmatch(symbol) else symbol


def row_limit_fractions(
    symbols: Sequence[str], dates: np.ndarray, st: np.ndarray, list_dates: np.ndarray
) -> np.ndarray:
    """Limit fraction of each (symbol, date) row of a long frame; NaN where none applies.

    A-share rows get the board/date/status/listing rule; other markets have no daily limits.
    """
    from oomrl.market import calendar, limits

    names = np.asarray(symbols, dtype=object)
    out = np.full(len(names), np.nan)
    is_cn = np.array(
        [boards.SYMBOL_PATTERN.fullmatch(str(s)) is not None for s in names], dtype=bool
    )
    if not is_cn.any():
        return out
    rows = np.flatnonzero(is_cn)
    codes = np.array(
        [limits.BOARD_CODE[boards.board_of(str(s))] for s in names[rows]], dtype=np.int64
    )
    days = np.asarray(dates, dtype="datetime64[ns]")[rows]
    listed = np.asarray(list_dates, dtype="datetime64[ns]")[rows]
    session = calendar.session_numbers(days, listed)
    flags = np.nan_to_num(np.asarray(st, dtype=float)[rows], nan=0.0) > 0
    out[rows] = limits.limit_fractions(codes, days, flags, session, listed)
    return out


def calendar_of(symbol: str) -> str | None:
    """The exchange_calendars name of a symbol's exchange (None when unknown)."""
    market = _market_or_none(symbol)
    return market.calendar if market else None


def market_name(symbol: str) -> str | None:
    """The name of a symbol's market (None when it is not a symbol)."""
    market = _market_or_none(symbol)
    return market.name if market else None


def _market_or_none(symbol: str) -> Market | None:
    try:
        return market_of(symbol)
    except ValueError:
        return None


def market_of_index(code: str) -> Market:
    """The market of an index code.

    A benchmark's own market; six digits for CSI/SSE indices; else by ticker."""
    for market in MARKETS.values():
        if market.benchmark == code:
            return market
    if str(code).isdigit():
        return MARKETS["cn"]
    try:
        return market_of(str(code))
    except ValueError:
        return Market("unknown", None, None, "")
