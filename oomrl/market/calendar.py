"""Trading calendars from exchange_calendars: XSHG (Shanghai/Shenzhen A-shares) by default, any
other by name."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

import exchange_calendars as xcals
import numpy as np
import pandas as pd

CALENDAR_NAME = "XSHG"
CALENDAR_START = "2000-01-01"
"""exchange_calendars defaults to the last 20 years; the CSI 300 history starts in 2005."""


@lru_cache(maxsize=8)
def get(name: str = CALENDAR_NAME) -> xcals.ExchangeCalendar:
    """A calendar by exchange_calendars name (loaded once; construction takes a while)."""
    return xcals.get_calendar(name, start=CALENDAR_START)


def xshg() -> xcals.ExchangeCalendar:
    """The XSHG calendar."""
    return get(CALENDAR_NAME)


def sessions(
    start: str | pd.Timestamp, end: str | pd.Timestamp, name: str = CALENDAR_NAME
) -> pd.DatetimeIndex:
    """Sessions in [start, end], tz-naive dates, clipped to the calendar's bounds."""
    cal = get(name)
    lo = max(pd.Timestamp(start).normalize(), cal.first_session)
    hi = min(pd.Timestamp(end).normalize(), cal.last_session)
    if lo > hi:
        return pd.DatetimeIndex([])
    return pd.DatetimeIndex(cal.sessions_in_range(lo, hi)).tz_localize(None)


def is_session(day: str | pd.Timestamp, name: str = CALENDAR_NAME) -> bool:
    """True when the date is a session of the calendar."""
    cal = get(name)
    stamp = pd.Timestamp(day).normalize()
    if stamp < cal.first_session or stamp > cal.last_session:
        return False
    return bool(cal.is_session(stamp))


def non_sessions(dates: pd.Series | pd.DatetimeIndex, name: str = CALENDAR_NAME) -> pd.Series:
    """Boolean mask (aligned to `dates`) marking the dates that are not sessions of the calendar."""
    stamps = pd.DatetimeIndex(pd.to_datetime(dates)).normalize()
    valid = sessions(stamps.min(), stamps.max(), name) if len(stamps) else pd.DatetimeIndex([])
    return pd.Series(~stamps.isin(valid), index=getattr(dates, "index", None))


def session_numbers(dates: np.ndarray, since: np.ndarray, name: str = CALENDAR_NAME) -> np.ndarray:
    """1-based session count from `since` (a listing date) to `dates`, elementwise.

    NaN where `since` is NaT. Counts the calendar's sessions in [first session on or after
    `since`, date]. A date before `since` gives a number below 1.
    """
    start = np.ravel(np.asarray(since, dtype="datetime64[ns]"))
    known = ~np.isnat(start)
    if not known.any():
        return np.full(np.shape(dates), np.nan)
    # numpy arrays, not DatetimeIndex. A boolean mask on a panel's worth of cells is much cheaper
    # there.
    days, start = np.ravel(np.asarray(dates, dtype="datetime64[ns]"))[known], start[known]
    out = np.full(known.shape, np.nan)
    first_day, last_day = pd.DatetimeIndex(days).min(), pd.DatetimeIndex(days).max()  # NaT skipped
    lo = min(first_day, pd.Timestamp(start.min()))
    hi = max(last_day, pd.Timestamp(start.max()))
    grid = sessions(lo - pd.Timedelta(days=10), hi + pd.Timedelta(days=10), name).values
    out[known] = np.searchsorted(grid, days, side="right") - np.searchsorted(
        grid, start, side="left"
    )
    return out.reshape(np.shape(dates))


def week_key(day: pd.Timestamp) -> tuple[int, int]:
    """ISO (year, week) of a date. Weekly rebalances happen on the first session of each key."""
    iso = pd.Timestamp(day).isocalendar()
    return (int(iso[0]), int(iso[1]))


XSHG_TIMEZONE = "Asia/Shanghai"


def last_completed_session(now: datetime, name: str = CALENDAR_NAME) -> pd.Timestamp:
    """The latest session whose close is at or before `now` (tz-aware; naive is UTC).

    XSHG by default (close 15:00 Asia/Shanghai). Bars dated after it cannot be final. They
    are of a session still trading, or of one that has not happened yet.
    """
    cal = get(name)
    stamp = pd.Timestamp(now)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    local_day = stamp.tz_convert(str(cal.tz)).normalize().tz_localize(None)
    day = min(max(local_day, cal.first_session), cal.last_session)
    session = cal.date_to_session(day, direction="previous")
    if cal.session_close(session) > stamp:
        if session == cal.first_session:
            # Before the calendar: no session has completed
            return pd.Timestamp(session) - pd.Timedelta(days=1)
        session = cal.previous_session(session)
    return pd.Timestamp(session)
