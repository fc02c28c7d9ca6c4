"""The sample clock: the bundled sample played forward one session per ingest.

So a fresh stack tells its story on its defaults: a first report, an alert, a repair. It does not
start at the sample's end. OOMRL_SAMPLE_CLOCK names a session. An empty store is then filled with
the sample up to that session. Each later ingest of the sample adds the next session. That is bars
and CSI 300 levels, and membership (point in time) whole. Every consumer's default `as_of` is the
store's last session. So the daily chain then marks, diagnoses and reports one new session per
run. Once the store holds the sample's last session, the clock has nothing to add. The chain then
ends `NoNewSession`. Live sources, an explicit `end`, and the clock `off` ingest as they always
did. `off` is the default outside `oomrl server up`.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any, cast

import pandas as pd

from oomrl.market import calendar

SAMPLE = "sample"
DAY_ONE = date(2024, 7, 1)  # what `oomrl server up` sets: the demo's first session


def next_session(day: date) -> date:
    """The first XSHG session after `day`."""
    found = calendar.sessions(
        pd.Timestamp(day + timedelta(days=1)), pd.Timestamp(day + timedelta(days=30))
    )
    return cast(date, found[0].date())


def clock_end(clock: date | None, store: Any, sample_last: date) -> date | None:
    """The last session the next ingest of the sample may write. None: no clock.

    Into an empty store, that is the clock's session. Else it is the session after the store's
    last one. Never past the sample's end."""
    if clock is None:
        return None
    last = store.bar_summary()["last_date"] if not store.is_empty() else None
    end = clock if last is None else max(clock, next_session(pd.Timestamp(last).date()))
    return min(end, sample_last)


def clocked_end(source: Any, end: Any, clock: date | None, store: Any) -> Any:
    """`end` for an ingest from `source`: as given, unless the sample clock decides it.

    The clock decides for the sample source with no explicit end."""
    if clock is None or end or getattr(source, "name", None) != SAMPLE:
        return end
    return clock_end(clock, store, source.coverage()[1])
