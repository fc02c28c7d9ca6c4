"""MarketFrames.build's fast paths give pandas' own numbers bit for bit.

`rolling_by_column` runs pandas' rolling kernels once over every column laid end to end; it must
equal the per-column `DataFrame.rolling(...).mean()/.std()` (then `shift(1)`) exactly, NaN for NaN,
on the awkward panels: missing values, suspensions (NaN runs), constant stretches, columns with
fewer values than the window and all-NaN columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from oomrl.market import calendar, limits
from oomrl.portfolio.market import ColumnWindows, rolling_by_column, to_tick


def per_column(values: np.ndarray, window: int, min_periods: int, statistic: str) -> np.ndarray:
    """What build computed before: pandas' column-by-column rolling statistic, shifted one row."""
    rolling = pd.DataFrame(values).rolling(window, min_periods=min_periods)
    return (rolling.mean() if statistic == "mean" else rolling.std()).shift(1).to_numpy()


def identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits (every NaN equal to every NaN)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def awkward_panel(rows: int = 300, seed: int = 0) -> np.ndarray:
    """Traded values and returns as replays see them: gaps, suspensions, flat runs, short and empty
    columns."""
    rng = np.random.default_rng(seed)
    values = rng.lognormal(15, 2, (rows, 12)) * rng.choice([1.0, -1.0], (rows, 12), p=[0.9, 0.1])
    values[rng.random(values.shape) < 0.05] = np.nan  # scattered missing cells
    values[40:90, 1] = np.nan  # a suspension longer than the window
    values[100:103, 2] = np.nan  # a short one
    values[:, 3] = np.nan  # never traded
    values[: rows - 7, 4] = np.nan  # listed 7 sessions before the end: fewer values than the window
    values[50:120, 5] = 123.456  # a constant stretch (pandas' same-value shortcut)
    values[:, 6] = 1e-12 * np.arange(rows)  # tiny next to the others' magnitudes
    values[10, 7], values[11, 8] = np.inf, -np.inf  # pandas treats infinities as missing
    values[:, 9] = 0.0
    values[::2, 10] = -0.0
    values[:, 11] = rng.normal(0, 0.02, rows)  # returns-sized numbers
    return values


@pytest.mark.parametrize(
    "statistic,window,min_periods",
    [
        ("mean", 20, 5),
        ("std", 20, 2),
        ("mean", 1, 1),
        ("std", 2, 2),
        ("mean", 60, 5),
        ("std", 500, 2),
    ],
)
def test_rolling_by_column_is_pandas_per_column_bit_for_bit(
    statistic: str, window: int, min_periods: int
) -> None:
    values = awkward_panel()
    got = rolling_by_column(values, ColumnWindows(len(values), window), min_periods, statistic)  # type: ignore[arg-type]
    assert identical(got, per_column(values, window, min_periods, statistic))


def test_a_window_never_reaches_into_the_previous_column() -> None:
    # Column 1 alone has fewer values than min_periods: borrowing column 0's tail would give
    # numbers.
    values = np.array([[1.0, np.nan], [2.0, np.nan], [3.0, 7.0], [4.0, 8.0]])
    got = rolling_by_column(values, ColumnWindows(4, 3), 3, "mean")
    assert np.isnan(got[:, 1]).all()
    assert identical(got, per_column(values, 3, 3, "mean"))
    start, end = ColumnWindows(4, 2).get_window_bounds(8)  # the two rows before each, in its column
    assert start.tolist() == [0, 0, 0, 1, 4, 4, 4, 5]
    assert end.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (1, 1), (3, 4)])
def test_rolling_by_column_on_tiny_panels(shape: tuple[int, int]) -> None:
    values = np.arange(float(np.prod(shape))).reshape(shape)
    for statistic in ("mean", "std"):
        assert identical(
            rolling_by_column(values, ColumnWindows(shape[0], 20), 2, statistic),  # type: ignore[arg-type]
            per_column(values, 20, 2, statistic),
        )


@settings(max_examples=60, deadline=None)
@given(
    values=arrays(
        np.float64,
        st.tuples(st.integers(1, 40), st.integers(1, 5)),
        elements=st.one_of(st.just(np.nan), st.floats(-1e6, 1e6), st.sampled_from([0.0, 1.0, 2.5])),
    ),
    window=st.integers(1, 25),
    statistic=st.sampled_from(["mean", "std"]),
)
def test_rolling_by_column_matches_on_any_panel(
    values: np.ndarray, window: int, statistic: str
) -> None:
    min_periods = min(2, window)
    windows = ColumnWindows(len(values), window)
    assert identical(
        rolling_by_column(values, windows, min_periods, statistic),  # type: ignore[arg-type]
        per_column(values, window, min_periods, statistic),
    )


def test_to_tick_is_the_one_line_formula() -> None:
    rng = np.random.default_rng(1)
    prices = np.round(rng.uniform(0.5, 500, (200, 7)), 4)
    prices[3, 2] = np.nan
    factor = rng.uniform(0.5, 3.0, prices.shape)
    assert identical(to_tick(prices, 0.01), np.floor(prices / 0.01 + 0.5 + 1e-9) * 0.01)
    assert identical(
        to_tick(prices, 0.01, factor), np.floor(prices / factor / 0.01 + 0.5 + 1e-9) * 0.01
    )


def test_listing_day_limits_are_the_cellwise_rule() -> None:
    """limit_fractions looks up free sessions only near a listing: the same as the rule on every
    cell."""
    rng = np.random.default_rng(2)
    dates = pd.bdate_range("2019-06-03", periods=60).values[:, None]
    codes = np.array(
        [limits.MAIN, limits.CHINEXT, limits.STAR, limits.BSE, limits.MAIN, limits.STAR]
    )
    st = rng.random((60, len(codes))) < 0.2
    listed = np.array(
        ["2019-06-05", "2020-08-24", "NaT", "2021-11-15", "2023-04-10", "2019-07-22"],
        dtype="datetime64[ns]",
    )
    list_dates = np.broadcast_to(listed, st.shape)
    session = rng.integers(-3, 9, st.shape).astype(float)
    session[rng.random(st.shape) < 0.2] = np.nan
    every_cell = (
        np.isfinite(session) & (session >= 1) & (session <= limits.free_sessions(codes, list_dates))
    )
    expected = np.where(every_cell, np.nan, limits.limit_fraction(codes, dates, st))
    assert identical(limits.limit_fractions(codes, dates, st, session, list_dates), expected)
    assert identical(
        limits.limit_fractions(codes, dates, st, np.nan, list_dates),
        limits.limit_fraction(codes, dates, st),
    )


def test_session_numbers_count_the_calendar_sessions() -> None:
    days = np.broadcast_to(pd.bdate_range("2024-01-02", periods=30).values[:, None], (30, 3))
    since = np.broadcast_to(
        np.array(["2024-01-10", "NaT", "2023-12-29"], dtype="datetime64[ns]"), days.shape
    )
    numbers = calendar.session_numbers(days, since)
    grid = calendar.sessions("2023-12-01", "2024-03-01").values
    for t, i in np.ndindex(days.shape):
        if i == 1:
            assert np.isnan(numbers[t, i])
        else:
            expected = np.searchsorted(grid, days[t, i], "right") - np.searchsorted(
                grid, since[t, i], "left"
            )
            assert numbers[t, i] == expected
    assert numbers[0, 2] == 2 and numbers[6, 0] == 1  # 2023-12-29 and 2024-01-02; 2024-01-10 itself
