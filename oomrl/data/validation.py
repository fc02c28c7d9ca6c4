"""Validation of bars, index levels and membership before anything reaches the store.

Bad rows are quarantined with a reason."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

import numpy as np
import pandas as pd

from oomrl.data.schema import (
    ADJUSTMENTS,
    BAR_COLUMNS,
    INDEX_KINDS,
    PRICE_FIELDS,
    conform_bars,
    conform_index,
    conform_membership,
    from_yyyymmdd,
)
from oomrl.errors import DataValidationError
from oomrl.market import boards, markets
from oomrl.market.calendar import CALENDAR_NAME, last_completed_session, non_sessions

LIMIT_TOLERANCE = 0.005
"""Slack on the price-limit rule (fraction of prev close) on top of two 0.01 CNY ticks: qfq prices
are rounded to the cent after scaling, so a true limit move can look a little larger than the
limit."""
VWAP_TOLERANCE = 0.02
"""Slack on amount/volume vs the day's range (auction prints and rounding of volume)."""
MAX_QFQ_FACTOR = 20.0
"""qfq scales past prices down, so raw VWAP >= qfq low; but a raw VWAP more than 20x the qfq high
means the volume is almost surely in lots, not shares."""
INDEX_MAX_MOVE = 0.20
"""CSI indices have never moved 20 % in a day; a bigger jump is a data error (e.g. a spliced
series)."""
TICK = 0.01

Detail = str | Callable[[int], str] | None


@dataclass
class ValidationResult:
    """Rows that passed (schema dtypes) and rows that failed, with a `reason` column."""

    valid: pd.DataFrame
    quarantined: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def reasons(self) -> dict[str, int]:
        """Count of quarantined rows per rule name (a row with several rules counts for each)."""
        return count_reasons(self.quarantined)


def count_reasons(quarantined: pd.DataFrame) -> dict[str, int]:
    """Rows per rule name in a quarantine frame's `reason` column ("rule: detail; rule: detail")."""
    counts: dict[str, int] = {}
    for text in quarantined.get("reason", pd.Series(dtype=str)):
        for part in str(text).split("; "):
            rule = part.split(":", 1)[0]
            counts[rule] = counts.get(rule, 0) + 1
    return counts


class _Reasons:
    """Collects per-row reasons; messages are built only for flagged rows (cheap on clean data)."""

    def __init__(self, length: int) -> None:
        self.parts: dict[int, list[str]] = {}
        self.any = np.zeros(length, dtype=bool)

    def add(self, mask: np.ndarray, rule: str, detail: Detail = None) -> None:
        """Flag rows. `detail` is a fixed text or a function of one row position giving the text."""
        rows = np.flatnonzero(mask)
        self.any[rows] = True
        for row in rows:
            text = detail(int(row)) if callable(detail) else detail
            self.parts.setdefault(int(row), []).append(f"{rule}: {text}" if text else rule)

    def split(self, frame: pd.DataFrame) -> ValidationResult:
        if not self.any.any():  # the common case: no copies of a clean batch
            return ValidationResult(
                valid=frame, quarantined=frame.iloc[:0].assign(reason=pd.Series(dtype=object))
            )
        bad = frame.loc[self.any].copy()
        bad["reason"] = ["; ".join(self.parts[int(i)]) for i in np.flatnonzero(self.any)]
        return ValidationResult(
            valid=frame.loc[~self.any].reset_index(drop=True),
            quarantined=bad.reset_index(drop=True),
        )


def _not_in(values: pd.Series, accept: Callable[[str], bool]) -> np.ndarray:
    """Rows whose value fails `accept`, testing each distinct value once (symbols repeat thousands
    of times)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    verdicts = np.array([not accept(str(value)) for value in uniques], dtype=bool)
    return verdicts[codes] if len(uniques) else np.zeros(len(values), dtype=bool)


def _per_value(values: pd.Series, function: Callable[[str], object]) -> np.ndarray:
    """`function` of each row's value, computed once per distinct value (symbols repeat thousands of
    times)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return (
        np.array([function(str(value)) for value in uniques], dtype=object)[codes]
        if len(uniques)
        else np.array([], dtype=object)
    )


def _duplicate_masks(frame: pd.DataFrame, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(identical extra copies, conflicting rows) for rows sharing `key`."""
    dup_any = frame.duplicated(key, keep=False).to_numpy()
    if not dup_any.any():
        return dup_any, dup_any
    identical_extra = frame.duplicated(keep="first").to_numpy() & dup_any
    distinct = frame.loc[dup_any].drop_duplicates()
    conflict_keys = distinct[distinct.duplicated(key, keep=False)][key].drop_duplicates()
    conflicting = frame[key].merge(conflict_keys, on=key, how="left", indicator=True)["_merge"]
    return identical_extra, (conflicting == "both").to_numpy()


def _limit_pct(rows: pd.DataFrame) -> np.ndarray:
    """Limit fraction per row by board, date, ST flag and listing age. NaN where no limit
    applies."""
    return markets.row_limit_fractions(
        rows["symbol"].to_numpy(),
        rows["date"].to_numpy(),
        rows["st"].to_numpy(),
        from_yyyymmdd(rows["list_date"].to_numpy()),
    )


def _limit_breaches(
    frame: pd.DataFrame, usable: np.ndarray
) -> tuple[np.ndarray, Callable[[int], str]]:
    """Rows whose high/low move from the previous close exceeds the board limit (+ tolerance).

    The previous close is prev_close_raw when the source gave one. Else it is the previous bar's
    close of the same symbol. That has the same adjustment basis, so returns and hence limit moves
    are preserved.
    """
    needed = ["symbol", "date", "close", "high", "low", "prev_close_raw", "st", "list_date"]
    ordered = frame.loc[usable, needed].sort_values(["symbol", "date"], kind="mergesort")
    previous = ordered.groupby("symbol", sort=False)["close"].shift(1)
    prev = ordered["prev_close_raw"].where(ordered["prev_close_raw"].notna(), previous)
    pct = pd.Series(_limit_pct(ordered), index=ordered.index)
    slack = pct + LIMIT_TOLERANCE + 2 * TICK / prev
    breach = (
        (ordered["high"] / prev - 1 > slack) | (ordered["low"] / prev - 1 < -slack)
    ).to_numpy()
    pct_of = pct.to_dict()
    mask = np.zeros(len(frame), dtype=bool)
    mask[ordered.index[breach]] = True

    def detail(row: int) -> str:
        sym, base = frame.at[row, "symbol"], prev[row]
        return (
            f"close {frame.at[row, 'close']:.4g} (high {frame.at[row, 'high']:.4g}, low "
            f"{frame.at[row, 'low']:.4g}) vs prev close {base:.4g}: "
            f"{frame.at[row, 'close'] / base - 1:+.1%}, "
            f"beyond the ±{pct_of[row]:.0%} {boards.board_of(sym).value}-board limit on that date"
        )

    return mask, detail


def _volume_amount(frame: pd.DataFrame) -> np.ndarray:
    """Volume/amount that contradict each other or the day's price range."""
    volume, amount = frame["volume"], frame["amount"]
    has_amount = amount.notna()
    bad = (volume < 0) | (has_amount & (amount < 0))
    bad |= has_amount & (volume == 0) & (amount > 0)
    bad |= has_amount & (volume > 0) & (amount == 0)
    vwap = amount / volume.where(volume > 0)
    low_ok = vwap >= frame["low"] * (1 - VWAP_TOLERANCE)
    high_ok = vwap <= frame["high"] * (1 + VWAP_TOLERANCE)
    adj = frame["adjustment"]
    # qfq scales history down and hfq up. So the raw VWAP sits above / below the adjusted range.
    range_bad = (
        ((adj == "none") & ~(low_ok & high_ok))
        | ((adj == "qfq") & ~(low_ok & (vwap <= frame["high"] * MAX_QFQ_FACTOR)))
        | ((adj == "hfq") & ~high_ok)
    )
    bad |= vwap.notna() & range_bad
    return cast(np.ndarray, bad.fillna(False).to_numpy())


def _dated_checks(
    reasons: _Reasons, dates: pd.Series, now: datetime | None, calendars: np.ndarray | None = None
) -> None:
    """Calendar rules, two of them.

    A date after the last session its exchange had closed as of `now`: its data cannot be final.
    Or an earlier date that is not a session. `calendars` names each row's exchange calendar
    (default XSHG). None for a row skips the rules."""
    clock = now or datetime.now(UTC)
    names = (
        np.full(len(dates), CALENDAR_NAME, dtype=object)
        if calendars is None
        else np.asarray(calendars, object)
    )
    dated = dates.notna().to_numpy()
    future = np.zeros(len(dates), dtype=bool)
    off = np.zeros(len(dates), dtype=bool)
    last_of: dict[str, pd.Timestamp] = {}
    for name in sorted({n for n in names[dated] if n}):
        rows = dated & (names == name)
        last_of[name] = last = last_completed_session(clock, name)
        late = rows & (dates > last).to_numpy()
        future |= late
        past = rows & ~late
        off[past] = non_sessions(dates[past], name).to_numpy()
    close = {"XSHG": " (close 15:00 Asia/Shanghai)"}
    reasons.add(
        future,
        "future_session",
        lambda row: (
            f"{dates.iat[row]:%Y-%m-%d} is after the last completed {names[row]} session "
            f"{last_of[names[row]]:%Y-%m-%d}{close.get(names[row], '')} as of "
            f"{pd.Timestamp(clock):%Y-%m-%d %H:%M %Z}"
        ),
    )
    reasons.add(
        off, "non_session", lambda row: f"{dates.iat[row]:%Y-%m-%d} is not an {names[row]} session"
    )


def validate_bars(frame: pd.DataFrame, now: datetime | None = None) -> ValidationResult:
    """Split bars into valid and quarantined rows. Every quarantined row names the rule(s) it broke.

    `now` is the clock (default: the current time). Bars of sessions that had not closed by then
    are quarantined. Raises DataValidationError when the frame lacks a schema column. Then nothing
    in it can be trusted.
    """
    bars = conform_bars(frame)
    reasons = _Reasons(len(bars))
    if bars.empty:
        return reasons.split(bars)
    nan_cols = bars[["date", "symbol", *PRICE_FIELDS, "volume"]].isna()
    nan_any = nan_cols.any(axis=1).to_numpy()
    reasons.add(
        nan_any, "missing_value", lambda row: ",".join(nan_cols.columns[nan_cols.iloc[row]])
    )
    bad_symbol = _not_in(bars["symbol"], markets.is_symbol)
    reasons.add(bad_symbol, "bad_symbol", lambda row: repr(bars.at[row, "symbol"]))
    reasons.add(
        _not_in(bars["adjustment"], ADJUSTMENTS.__contains__),
        "bad_adjustment",
        lambda row: repr(bars.at[row, "adjustment"]),
    )
    non_positive = (bars[list(PRICE_FIELDS)] <= 0).any(axis=1).to_numpy()
    reasons.add(non_positive, "non_positive_price")
    reasons.add(
        (bars["high"] < bars["low"]).to_numpy(),
        "high_below_low",
        lambda row: f"high {bars.at[row, 'high']} < low {bars.at[row, 'low']}",
    )
    outside = (
        (bars["close"] > bars["high"])
        | (bars["close"] < bars["low"])
        | (bars["open"] > bars["high"])
        | (bars["open"] < bars["low"])
    ).to_numpy()
    reasons.add(outside, "outside_range", "open/close outside [low, high]")
    extra, conflicting = _duplicate_masks(bars, ["date", "symbol"])
    reasons.add(extra, "duplicate", "identical copy of another (date, symbol) row")
    reasons.add(conflicting, "duplicate", "conflicting rows for the same (date, symbol)")
    _dated_checks(reasons, bars["date"], now, _per_value(bars["symbol"], markets.calendar_of))
    reasons.add(
        _bad_status(bars),
        "bad_status",
        lambda row: (
            f"factor {bars.at[row, 'factor']}, st {bars.at[row, 'st']}, list_date "
            f"{bars.at[row, 'list_date']}"
        ),
    )
    reasons.add(
        _volume_amount(bars),
        "volume_amount",
        lambda row: (
            f"volume {bars.at[row, 'volume']:.6g} shares, amount {bars.at[row, 'amount']:.6g} CNY "
            f"inconsistent with each other or the range [{bars.at[row, 'low']}, "
            f"{bars.at[row, 'high']}]"
        ),
    )
    # Limit moves are judged only between rows that are otherwise sound and unique.
    usable = ~reasons.any & ~bad_symbol
    limit_mask, limit_detail = _limit_breaches(bars, usable)
    reasons.add(limit_mask, "limit_breach", limit_detail)
    return reasons.split(bars)


def _bad_status(bars: pd.DataFrame) -> np.ndarray:
    """A factor that is not positive, an ST flag other than 0/1, or a bad list_date.

    A list_date must be a YYYYMMDD date."""
    factor, st, listed = bars["factor"], bars["st"], bars["list_date"]
    bad = (factor.notna() & ~(factor > 0)) | (st.notna() & ~st.isin([0.0, 1.0]))
    bad |= listed.notna() & pd.isna(from_yyyymmdd(listed.to_numpy()))
    return cast(np.ndarray, bad.to_numpy())


def validate_index(frame: pd.DataFrame, now: datetime | None = None) -> ValidationResult:
    """Split index levels into valid and quarantined rows.

    Quarantined: NaN, non-positive, duplicates, non-sessions, sessions not closed as of `now`,
    jumps."""
    levels = conform_index(frame)
    reasons = _Reasons(len(levels))
    if levels.empty:
        return reasons.split(levels)
    reasons.add(levels[["date", "close"]].isna().any(axis=1).to_numpy(), "missing_value")
    reasons.add((levels["close"] <= 0).to_numpy(), "non_positive_price")
    reasons.add(
        ~levels["kind"].isin(INDEX_KINDS).to_numpy(),
        "bad_kind",
        lambda row: repr(levels.at[row, "kind"]),
    )
    extra, conflicting = _duplicate_masks(levels, ["date", "code", "kind"])
    reasons.add(extra | conflicting, "duplicate")
    _dated_checks(
        reasons,
        levels["date"],
        now,
        _per_value(levels["code"], lambda code: markets.market_of_index(code).calendar),
    )
    ordered = levels.loc[~reasons.any].sort_values(["code", "kind", "date"])
    move = ordered.groupby(["code", "kind"])["close"].pct_change().abs()
    jump = np.zeros(len(levels), dtype=bool)
    jump[move.index[(move > INDEX_MAX_MOVE).to_numpy()]] = True
    reasons.add(jump, "index_jump", f"daily move beyond {INDEX_MAX_MOVE:.0%}")
    return reasons.split(levels)


def validate_membership(frame: pd.DataFrame) -> pd.DataFrame:
    """Membership rows checked whole (a snapshot is all or nothing); raises DataValidationError
    naming the rows."""
    members = conform_membership(frame)
    problems: list[str] = []
    if members["effective_date"].isna().any():
        problems.append(
            f"{int(members['effective_date'].isna().sum())} row(s) without a valid effective_date"
        )
    bad = members.loc[~members["symbol"].str.fullmatch(boards.SYMBOL_PATTERN.pattern), "symbol"]
    if len(bad):
        problems.append(f"bad symbol(s) {', '.join(bad.astype(str).head(5))}")
    dups = members[members.duplicated(["effective_date", "symbol"])]
    if len(dups):
        problems.append(f"duplicate (effective_date, symbol) {dups.iloc[0]['symbol']}")
    if problems:
        raise DataValidationError("membership rejected: " + "; ".join(problems))
    return members


__all__ = [
    "BAR_COLUMNS",
    "ValidationResult",
    "count_reasons",
    "validate_bars",
    "validate_index",
    "validate_membership",
]
