"""The XSHG (Shanghai/Shenzhen A-share) trading calendar, from exchange_calendars."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

import exchange_calendars as xcals
import pandas as pd

CALENDAR_NAME = "XSHG"
CALENDAR_START = "2000-01-01"
"""exchange_calendars defaults to the last 20 years; the CSI 300 history starts in 2005."""


@lru_cache(maxsize=1)
def xshg() -> xcals.ExchangeCalendar:
    """The XSHG calendar (loaded once; construction takes a while)."""
    return xcals.get_calendar(CALENDAR_NAME, start=CALENDAR_START)


def sessions(start: str | pd.Timestamp, end: str | pd.Timestamp) -> pd.DatetimeIndex:
    """XSHG sessions in [start, end], tz-naive dates, clipped to the calendar's bounds."""
    cal = xshg()
    lo = max(pd.Timestamp(start).normalize(), cal.first_session)
    hi = min(pd.Timestamp(end).normalize(), cal.last_session)
    if lo > hi:
        return pd.DatetimeIndex([])
    return pd.DatetimeIndex(cal.sessions_in_range(lo, hi)).tz_localize(None)


def is_session(day: str | pd.Timestamp) -> bool:
    """True when the date is an XSHG trading session."""
    cal = xshg()
    stamp = pd.Timestamp(day).normalize()
    if stamp < cal.first_session or stamp > cal.last_session:
        return False
    return bool(cal.is_session(stamp))


def non_sessions(dates: pd.Series | pd.DatetimeIndex) -> pd.Series:
    """Boolean mask (aligned to `dates`) marking the dates that are not XSHG sessions."""
    stamps = pd.DatetimeIndex(pd.to_datetime(dates)).normalize()
    valid = sessions(stamps.min(), stamps.max()) if len(stamps) else pd.DatetimeIndex([])
    return pd.Series(~stamps.isin(valid), index=getattr(dates, "index", None))


def week_key(day: pd.Timestamp) -> tuple[int, int]:
    """ISO (year, week) of a date: weekly rebalances happen on the first session of each key."""
    iso = pd.Timestamp(day).isocalendar()
    return (int(iso[0]), int(iso[1]))


XSHG_TIMEZONE = "Asia/Shanghai"


def last_completed_session(now: datetime) -> pd.Timestamp:
    """The latest XSHG session whose close (15:00 Asia/Shanghai) is at or before `now` (tz-aware; naive is UTC).

    Bars dated after it cannot be final: a session still trading, or one that has not happened yet.
    """
    cal = xshg()
    stamp = pd.Timestamp(now)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    local_day = stamp.tz_convert(XSHG_TIMEZONE).normalize().tz_localize(None)
    day = min(max(local_day, cal.first_session), cal.last_session)
    session = cal.date_to_session(day, direction="previous")
    if cal.session_close(session) > stamp:
        if session == cal.first_session:
            return pd.Timestamp(session) - pd.Timedelta(days=1)  # before the calendar: no session has completed
        session = cal.previous_session(session)
    return pd.Timestamp(session)
