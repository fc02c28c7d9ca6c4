"""Every validation rule quarantines a failing example with a reason naming the rule, and passes
clean data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from oomrl.data.validation import validate_bars, validate_index, validate_membership
from oomrl.errors import DataValidationError
from oomrl.market.calendar import last_completed_session
from tests.data.conftest import BarsFactory


def test_clean_bars_pass_whole(bars: BarsFactory) -> None:
    frame = bars()
    result = validate_bars(frame)
    assert len(result.valid) == len(frame) and result.quarantined.empty
    assert (
        result.valid["date"].dtype == "datetime64[ns]" and result.valid["volume"].dtype == "float64"
    )
    assert result.reasons == {}


def test_missing_column_rejects_the_whole_batch(bars: BarsFactory) -> None:
    with pytest.raises(DataValidationError, match="missing column.*amount"):
        validate_bars(bars().drop(columns=["amount"]))


def _only_bad(frame: pd.DataFrame, row: int) -> str:
    result = validate_bars(frame)
    assert len(result.quarantined) == 1, result.quarantined
    bad = result.quarantined.iloc[0]
    assert (bad["date"], bad["symbol"]) == (
        pd.Timestamp(frame.at[row, "date"]),
        frame.at[row, "symbol"],
    )
    assert len(result.valid) == len(frame) - 1
    return str(bad["reason"])


def test_nan_and_non_numeric_values_are_quarantined(bars: BarsFactory) -> None:
    frame = bars()
    frame["close"] = frame["close"].astype(object)
    frame.at[2, "close"] = "n/a"
    assert _only_bad(frame, 2).startswith("missing_value: close")


def test_timezone_aware_dates_become_session_dates(bars: BarsFactory) -> None:
    frame = bars()
    frame["date"] = pd.to_datetime(frame["date"]).dt.tz_localize("Asia/Shanghai")
    result = validate_bars(frame)
    assert result.quarantined.empty and result.valid["date"].dt.tz is None
    assert result.valid["date"].iloc[0] == pd.Timestamp("2024-07-01")


def test_intraday_timestamps_are_normalized_to_the_session(bars: BarsFactory) -> None:
    frame = bars()
    frame["date"] = pd.to_datetime(frame["date"]) + pd.Timedelta(hours=15)
    frame["prev_close_raw"] = frame["prev_close_raw"].astype("float64")
    result = validate_bars(frame)
    assert (
        result.quarantined.empty
        and (result.valid["date"] == result.valid["date"].dt.normalize()).all()
    )


def test_unparseable_date_is_quarantined(bars: BarsFactory) -> None:
    frame = bars()
    frame["date"] = frame["date"].astype(object)
    frame.at[1, "date"] = "not a date"
    result = validate_bars(frame)
    assert result.quarantined["reason"].str.contains("missing_value: date").sum() == 1


def test_non_positive_price(bars: BarsFactory) -> None:
    frame = bars()
    frame.at[3, "low"] = 0.0
    assert "non_positive_price" in _only_bad(frame, 3)


def test_high_below_low(bars: BarsFactory) -> None:
    frame = bars()
    frame.at[1, "high"], frame.at[1, "low"] = frame.at[1, "low"], frame.at[1, "high"]
    assert "high_below_low" in _only_bad(frame, 1)


def test_close_outside_range(bars: BarsFactory) -> None:
    frame = bars()
    frame.at[4, "close"] = frame.at[4, "high"] + 0.02
    assert _only_bad(frame, 4).startswith("outside_range")


def test_identical_duplicate_keeps_one_copy(bars: BarsFactory) -> None:
    frame = bars()
    doubled = pd.concat([frame, frame.iloc[[2]]], ignore_index=True)
    result = validate_bars(doubled)
    assert len(result.valid) == len(frame)
    assert result.quarantined["reason"].tolist() == [
        "duplicate: identical copy of another (date, symbol) row"
    ]


def test_conflicting_duplicates_are_all_quarantined(bars: BarsFactory) -> None:
    frame = bars()
    other = frame.iloc[[2]].copy()
    other["volume"] = 5.0e6
    other["amount"] = other["amount"] * 5
    result = validate_bars(pd.concat([frame, other], ignore_index=True))
    assert len(result.quarantined) == 2
    assert result.quarantined["reason"].str.contains("conflicting").all()


def test_non_session_date(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=3)
    frame.at[2, "date"] = pd.Timestamp("2024-07-06")  # a Saturday
    assert "non_session: 2024-07-06 is not an XSHG session" in _only_bad(frame, 2)


def test_holiday_is_not_a_session(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), start="2024-09-26", days=3)
    frame.at[2, "date"] = pd.Timestamp("2024-10-01")  # National Day
    assert "non_session" in _only_bad(frame, 2)


# Wednesday 2024-07-03 in Shanghai (UTC+8): the session closes at 15:00 local, 07:00 UTC.
BEFORE_CLOSE = datetime(2024, 7, 3, 6, 59, tzinfo=UTC)
AT_CLOSE = datetime(2024, 7, 3, 7, 0, tzinfo=UTC)


def test_sessions_not_closed_yet_are_quarantined(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), start="2024-07-01", days=5)  # 07-01 .. 07-05
    early = validate_bars(frame, now=BEFORE_CLOSE)
    assert list(early.valid["date"].dt.day) == [
        1,
        2,
    ]  # 07-03 is still trading, 07-04 and 07-05 are to come
    assert early.reasons == {"future_session": 3}
    assert early.quarantined.at[0, "reason"] == (
        "future_session: 2024-07-03 is after the last completed XSHG session 2024-07-02 "
        "(close 15:00 Asia/Shanghai) as of 2024-07-03 06:59 UTC"
    )
    assert list(validate_bars(frame, now=AT_CLOSE).valid["date"].dt.day) == [1, 2, 3]
    # Saturday noon in Shanghai
    weekend = datetime(2024, 7, 6, 12, 0, tzinfo=timezone(timedelta(hours=8)))
    assert validate_bars(frame, now=weekend).quarantined.empty


def test_a_future_date_off_the_calendar_is_quarantined_as_future(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=3)
    frame.at[2, "date"] = pd.Timestamp("2031-01-06")  # beyond the calendar exchange_calendars ships
    assert _only_bad(frame, 2).startswith(
        "future_session: 2031-01-06 is after the last completed XSHG session"
    )


def test_index_levels_of_sessions_not_closed_are_quarantined() -> None:
    result = validate_index(_levels([3500.0, 3510.0, 3520.0]), now=BEFORE_CLOSE)
    assert result.reasons == {"future_session": 1} and len(result.valid) == 2


def test_last_completed_session_by_calendar_and_close_time() -> None:
    assert last_completed_session(BEFORE_CLOSE) == pd.Timestamp("2024-07-02")
    assert last_completed_session(AT_CLOSE) == pd.Timestamp("2024-07-03")
    # Naive = UTC; Golden Week
    assert last_completed_session(datetime(2024, 10, 5, 12, 0)) == pd.Timestamp("2024-09-30")
    assert last_completed_session(datetime(1999, 1, 1, tzinfo=UTC)) < pd.Timestamp("2000-01-04")


@pytest.mark.parametrize(
    ("symbol", "move", "bad"),
    [
        ("600519.SH", 0.099, False),
        ("600519.SH", 0.12, True),
        ("300750.SZ", 0.19, False),
        ("300750.SZ", 0.25, True),
        ("688981.SH", -0.25, True),
        ("830799.BJ", 0.29, False),
    ],
)
def test_price_limit_per_board(bars: BarsFactory, symbol: str, move: float, bad: bool) -> None:
    frame = bars(symbols=(symbol,), days=3)
    prev = frame.at[1, "close"]
    new = round(prev * (1 + move), 2)
    frame.loc[2, ["open", "close", "high", "low"]] = [new, new, new, new]
    frame.at[2, "amount"] = frame.at[2, "volume"] * new
    result = validate_bars(frame)
    assert (len(result.quarantined) == 1) is bad
    if bad:
        assert result.quarantined.iloc[0]["reason"].startswith("limit_breach")
        assert "limit" in result.quarantined.iloc[0]["reason"]


def test_limit_move_exactly_at_the_limit_passes_on_qfq_rounding(bars: BarsFactory) -> None:
    frame = bars(symbols=("600000.SH",), days=2, adjustment="qfq")
    # raw 10.00 -> 11.00 limit-up, seen through a 0.3 qfq factor and rounded to cents: 3.00 -> 3.30
    # is +10.0 %, 2.99 -> 3.30 is +10.4 %, still one tick of rounding from the limit.
    frame.loc[0, ["open", "high", "low", "close"]] = [2.99, 2.99, 2.99, 2.99]
    frame.loc[1, ["open", "high", "low", "close", "prev_close_raw"]] = [
        3.30,
        3.30,
        3.30,
        3.30,
        np.nan,
    ]
    frame["amount"] = frame["volume"] * 10.5
    assert validate_bars(frame).quarantined.empty


def test_prev_close_raw_is_used_when_given(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=1)
    # First row of the batch, +30 % vs given prev
    frame.at[0, "prev_close_raw"] = frame.at[0, "close"] / 1.3
    assert "limit_breach" in _only_bad(frame, 0)


def test_volume_amount_contradictions(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=5)
    frame.at[0, "volume"] = -1.0
    frame.at[1, "volume"], frame.at[1, "amount"] = 0.0, 5e6
    frame.at[2, "amount"] = 0.0
    # Lots passed off as shares: VWAP 100x the price
    frame.at[3, "volume"] = frame.at[3, "volume"] / 100
    result = validate_bars(frame)
    assert sorted(result.quarantined["date"]) == sorted(frame["date"].iloc[:4])
    assert result.quarantined["reason"].str.startswith("volume_amount").all()


def test_volume_zero_without_amount_is_a_quiet_day(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=3)
    frame.at[1, "volume"], frame.at[1, "amount"] = 0.0, np.nan
    assert validate_bars(frame).quarantined.empty


@pytest.mark.parametrize(
    ("adjustment", "scale", "bad"),
    [
        ("qfq", 0.5, False),  # qfq prices below the raw VWAP: fine
        ("qfq", 1 / 50, True),  # VWAP 50x the qfq high: volume is in lots
        ("hfq", 2.0, False),  # hfq prices above the raw VWAP: fine
        ("hfq", 0.5, True),  # hfq prices below the raw VWAP: impossible
        ("none", 0.5, True),
    ],
)
def test_vwap_bounds_depend_on_adjustment(
    bars: BarsFactory, adjustment: str, scale: float, bad: bool
) -> None:
    frame = bars(symbols=("600519.SH",), days=3, adjustment=adjustment)
    for col in ("open", "high", "low", "close", "prev_close_raw"):
        frame[col] = frame[col] * scale  # amount stays raw
    assert (len(validate_bars(frame).quarantined) == 3) is bad


def test_bad_symbol_and_adjustment(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=3)
    frame.at[0, "symbol"] = "600519"
    frame.at[1, "adjustment"] = "forward"
    result = validate_bars(frame)
    reasons = sorted(result.quarantined["reason"])
    assert reasons[0].startswith("bad_adjustment: 'forward'") and reasons[1].startswith(
        "bad_symbol: '600519'"
    )
    assert result.reasons == {"bad_adjustment": 1, "bad_symbol": 1}


def test_several_reasons_on_one_row(bars: BarsFactory) -> None:
    frame = bars(symbols=("600519.SH",), days=2)
    frame.loc[1, ["high", "low", "date"]] = [1.0, 2.0, pd.Timestamp("2024-07-06")]
    reason = validate_bars(frame).quarantined.iloc[0]["reason"]
    assert "high_below_low" in reason and "non_session" in reason


def test_empty_frame_is_valid(bars: BarsFactory) -> None:
    result = validate_bars(bars().iloc[:0])
    assert result.valid.empty and result.quarantined.empty


def _levels(closes: list[float], start: str = "2024-07-01", kind: str = "price") -> pd.DataFrame:
    from oomrl.market.calendar import sessions

    dates = sessions(start, "2024-12-31")[: len(closes)]
    return pd.DataFrame({"date": dates, "code": "000300", "close": closes, "kind": kind})


def test_index_rules() -> None:
    levels = _levels([3500.0, 3510.0, -1.0, 3520.0, 5000.0, 3530.0])
    extra = pd.DataFrame(
        {
            "date": [pd.Timestamp("2024-07-06"), levels.at[0, "date"]],
            "code": "000300",
            "close": [3500.0, 3600.0],
            "kind": ["price", "price"],
        }
    )
    odd_kind = _levels([3500.0], kind="dividend")
    result = validate_index(pd.concat([levels, extra, odd_kind], ignore_index=True))
    reasons = " | ".join(result.quarantined["reason"])
    for rule in ("non_positive_price", "non_session", "duplicate", "index_jump", "bad_kind"):
        assert rule in reasons
    assert 3510.0 in set(result.valid["close"])


def test_index_missing_value_and_empty() -> None:
    result = validate_index(_levels([3500.0, np.nan]))
    assert result.quarantined.iloc[0]["reason"] == "missing_value"
    assert validate_index(_levels([])).valid.empty


def test_membership_is_all_or_nothing() -> None:
    good = pd.DataFrame(
        {
            "effective_date": ["2024-06-17"] * 2,
            "symbol": ["600519.SH", "300750.SZ"],
            "name": ["a", None],
        }
    )
    assert validate_membership(good)["name"].tolist() == ["a", ""]
    bad = pd.concat([good, good.iloc[[0]]], ignore_index=True)
    bad.loc[len(bad)] = ["someday", "600519", "x"]
    with pytest.raises(DataValidationError) as info:
        validate_membership(bad)
    message = str(info.value)
    assert "without a valid effective_date" in message and "bad symbol(s) 600519" in message
    assert "duplicate (effective_date, symbol) 600519.SH" in message


def test_identical_copies_keep_one_after_the_previous_close_is_derived() -> None:
    """A source without prev_close_raw derives it from the previous row; a row and its exact copy
    must get the same one (the previous *session's* close), or validation sees a conflict and drops
    both."""
    from oomrl.data.schema import conform_bars, with_prev_close

    rows = [
        ("2024-07-01", 100.0),
        ("2024-07-02", 101.0),
        ("2024-07-02", 101.0),
        ("2024-07-03", 102.0),
    ]
    frame = pd.DataFrame(
        {
            "date": [d for d, _ in rows],
            "symbol": "600519.SH",
            "open": [c for _, c in rows],
            "high": [c + 1 for _, c in rows],
            "low": [c - 1 for _, c in rows],
            "close": [c for _, c in rows],
            "volume": 1000.0,
            "amount": np.nan,
            "adjustment": "none",
            "prev_close_raw": np.nan,
        }
    )
    bars = with_prev_close(conform_bars(frame))
    assert bars["prev_close_raw"].tolist()[1:] == [100.0, 100.0, 101.0]
    checked = validate_bars(bars, now=datetime(2024, 7, 10, tzinfo=UTC))
    assert checked.valid["date"].dt.strftime("%m-%d").tolist() == ["07-01", "07-02", "07-03"]
    assert checked.quarantined["reason"].tolist() == [
        "duplicate: identical copy of another (date, symbol) row"
    ]
