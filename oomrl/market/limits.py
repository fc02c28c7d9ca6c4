"""Daily price limits of A-shares as a function of board, date, risk-warning status and listing age.

Vectorised: arrays of board codes, dates, ST flags and listing sessions in. Limit fractions out
(NaN = no limit that day). Limit prices are computed in integer fen from the exchange's reference
price. That is the previous close, or the ex-rights reference on an ex-date. They are rounded half
up to the tick. Each rule, with its source:

- Main board ±10 %. Risk-warning (ST, *ST) main-board stocks are ±5 %, and ±10 % from
  2026-07-06. On that day the SSE and SZSE Trading Rules (2026 revision) take effect. The change
  was first published on 2025-06-27 as the consultation notice
  《关于调整主板风险警示股票价格涨跌幅限制比例及有关事项的通知 （征求意见稿）》.
  It was enacted by folding it into the 2026 revisions of both exchanges' trading rules.
  Provenance of the date: press reports, not the exchanges' own notices (not read here). The SSE's
  draft trading rules of 2026-04-10 folded the notice in. Reports of the final rules give
  2026-07-06 as the first day (https://www.nashnova.com/feed/special/5176). Recheck against the
  exchanges' published rules before relying on ST limits near that date.
- ChiNext ±10 % (ST ±5 %) before 2020-08-24. ±20 % for every ChiNext stock, ST included, from
  2020-08-24. That is the first trading day under the ChiNext reform (SZSE ChiNext Trading Special
  Provisions, 2020).
- STAR Market ±20 %, ST included (SSE STAR Market Stock Trading Special Provisions, 2019). The
  board opened on 2019-07-22.
- Beijing Stock Exchange ±30 % (BSE Trading Rules, 2021; opened 2021-11-15).
- Listing days (IPO or relisting): no limit on the first 5 sessions. This holds on STAR. It
  holds on ChiNext for listings from 2020-08-24. It holds on the main board for listings from
  2023-04-10 (the first registration-based main-board IPOs). Before those dates ChiNext and
  main-board IPOs had a band of +44 % / -36 % around the issue price. That was on the first day
  only. Daily bars cannot check it (no issue price), so that day counts as unlimited here. BSE:
  the first day has no limit.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd

from oomrl.market.boards import Board, board_of

CHINEXT_REFORM = date(2020, 8, 24)
MAIN_REGISTRATION = date(2023, 4, 10)
MAIN_ST_TEN_PERCENT = date(2026, 7, 6)

# Board codes for the vectorised functions (index into BOARD_ORDER).
BOARD_ORDER: tuple[Board, ...] = (Board.MAIN, Board.CHINEXT, Board.STAR, Board.BSE)
BOARD_CODE = {board: code for code, board in enumerate(BOARD_ORDER)}
MAIN, CHINEXT, STAR, BSE = range(4)
FREE_SESSIONS_REGISTRATION = 5


def _day(value: date) -> np.datetime64:
    return np.datetime64(value, "D")


def _days(dates: np.ndarray | pd.DatetimeIndex | pd.Series) -> np.ndarray:
    return np.asarray(dates, dtype="datetime64[ns]").astype("datetime64[D]")


def limit_fraction(board: np.ndarray | int, dates: np.ndarray, st: np.ndarray | bool) -> np.ndarray:
    """The ± limit fraction of a board on a date (ST flag where True). Listing days are ignored."""
    board = np.asarray(board)
    days = _days(dates)
    st = np.asarray(st, dtype=bool)
    main_st = np.where(days < _day(MAIN_ST_TEN_PERCENT), 0.05, 0.10)
    main = np.where(st, main_st, 0.10)
    before_reform = days < _day(CHINEXT_REFORM)
    chinext = np.where(before_reform, np.where(st, 0.05, 0.10), 0.20)
    return np.select(
        [board == MAIN, board == CHINEXT, board == STAR, board == BSE],
        [main, chinext, np.full(np.shape(main), 0.20), np.full(np.shape(main), 0.30)],
        np.nan,
    )


def free_sessions(board: np.ndarray | int, list_dates: np.ndarray) -> np.ndarray:
    """How many sessions from a listing (IPO or relisting) trade without a price limit."""
    board = np.asarray(board)
    listed = _days(list_dates)
    registration = np.select(
        [board == STAR, board == CHINEXT, board == MAIN, board == BSE],
        [True, listed >= _day(CHINEXT_REFORM), listed >= _day(MAIN_REGISTRATION), False],
        False,
    )
    return np.where(registration, FREE_SESSIONS_REGISTRATION, 1)


def limit_fractions(
    board: np.ndarray | int,
    dates: np.ndarray,
    st: np.ndarray | bool,
    listing_session: np.ndarray | float,
    list_dates: np.ndarray,
) -> np.ndarray:
    """Limit fraction per cell. NaN where no limit applies (the free sessions after a listing).

    `listing_session` counts sessions from the listing date: 1 = listing day. NaN = unknown, which
    is treated as long listed.
    """
    fraction = limit_fraction(board, dates, st)
    session = np.asarray(listing_session, dtype=float)
    # Free sessions number 5 at most. The board and listing-date rules are looked up on those
    # cells only.
    free = np.isfinite(session) & (session >= 1) & (session <= FREE_SESSIONS_REGISTRATION)
    shape = np.broadcast_shapes(np.shape(board), np.shape(list_dates), session.shape)
    free = np.broadcast_to(free, shape)
    if free.any():
        free = free.copy()
        boards, listed = (
            np.broadcast_to(board, shape)[free],
            np.broadcast_to(list_dates, shape)[free],
        )
        free[free] = np.broadcast_to(session, shape)[free] <= free_sessions(boards, listed)
    return np.where(free, np.nan, fraction)


def limit_prices_fen(
    reference_fen: np.ndarray, fraction: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(limit-down, limit-up) in fen: reference x (1 -/+ fraction), rounded half up to the fen.

    Integer arithmetic on basis points, so x.xx5 rounds up exactly as the exchanges publish it.
    NaN fractions (no limit) give (0, a very large number).
    """
    ref = np.asarray(reference_fen, dtype=np.int64)
    frac = np.asarray(fraction, dtype=float)
    bp = np.rint(np.nan_to_num(frac, nan=0.0) * 10_000).astype(np.int64)
    # (ref * (10_000 -/+ bp) + 5_000) // 10_000, in place on one array each
    up, down = np.asarray(ref * (10_000 + bp)), np.asarray(ref * (10_000 - bp))
    for fen in (up, down):
        fen += 5_000
        fen //= 10_000
    unlimited = ~np.isfinite(frac)
    if not unlimited.any():
        return down, up
    return np.where(unlimited, 0, down), np.where(unlimited, np.iinfo(np.int64).max // 4, up)


def price_limit_pct(symbol: str, is_st: bool = False, on: date | None = None) -> float:
    """Daily price-limit fraction of one symbol on a date (default today)."""
    day = np.array([on or date.today()], dtype="datetime64[D]")
    return float(limit_fraction(BOARD_CODE[board_of(symbol)], day, is_st)[0])


def limit_prices(
    prev_close: float, symbol: str, is_st: bool = False, on: date | None = None
) -> tuple[float, float]:
    """(limit-down, limit-up) prices from the exchange's reference (unadjusted previous close)."""
    pct = price_limit_pct(symbol, is_st, on)
    down, up = limit_prices_fen(np.array([round(prev_close * 100)]), np.array([pct]))
    return int(down[0]) / 100, int(up[0]) / 100
