"""XSHG calendar, boards and price limits from the code, and point-in-time CSI 300 membership."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from oomrl.market import boards, calendar, limits
from oomrl.market.boards import Board
from oomrl.market.universe import members_between, members_on, membership_from_changes


def test_sessions_skip_weekends_and_holidays() -> None:
    days = calendar.sessions("2024-09-27", "2024-10-09")
    assert [d.strftime("%m-%d") for d in days] == [
        "09-27",
        "09-30",
        "10-08",
        "10-09",
    ]  # National Day week
    # As counted in the shared data README
    assert len(calendar.sessions("2024-07-01", "2026-02-27")) == 402
    assert calendar.sessions("2024-07-05", "2024-07-01").empty
    assert calendar.sessions("1990-01-01", "2000-01-05")[0] == pd.Timestamp("2000-01-04")


def test_is_session_and_history_back_to_2005() -> None:
    assert calendar.is_session("2005-01-04") and calendar.is_session("2026-02-27")
    assert not calendar.is_session("2018-06-18")  # Dragon Boat: the spurious H00300 row
    assert not calendar.is_session("1999-12-31") and not calendar.is_session("2099-01-02")


def test_non_sessions_mask_keeps_alignment() -> None:
    dates = pd.Series(
        pd.to_datetime(["2024-07-01", "2024-07-06", "2024-07-02"]), index=[10, 11, 12]
    )
    assert calendar.non_sessions(dates).to_dict() == {10: False, 11: True, 12: False}
    assert calendar.non_sessions(pd.Series([], dtype="datetime64[ns]")).empty


def test_week_key() -> None:
    assert calendar.week_key(pd.Timestamp("2024-12-30")) == (2025, 1)
    assert calendar.week_key(pd.Timestamp("2024-07-05")) == calendar.week_key(
        pd.Timestamp("2024-07-01")
    )


@pytest.mark.parametrize(
    ("code", "symbol", "board", "limit"),
    [
        ("600519", "600519.SH", Board.MAIN, 0.10),
        ("sz000001", "000001.SZ", Board.MAIN, 0.10),
        ("300750.SZ", "300750.SZ", Board.CHINEXT, 0.20),
        ("301269", "301269.SZ", Board.CHINEXT, 0.20),
        ("302132", "302132.SZ", Board.CHINEXT, 0.20),
        ("688981.SS", "688981.SH", Board.STAR, 0.20),
        ("830799", "830799.BJ", Board.BSE, 0.30),
        ("920001", "920001.BJ", Board.BSE, 0.30),
        ("1", "000001.SZ", Board.MAIN, 0.10),
    ],
)
def test_symbols_boards_and_limits(code: str, symbol: str, board: Board, limit: float) -> None:
    assert boards.to_symbol(code) == symbol
    assert boards.board_of(symbol) == board and limits.price_limit_pct(symbol) == limit


def test_st_limit_and_limit_prices() -> None:
    day = date(2025, 1, 2)
    assert limits.price_limit_pct("600000.SH", is_st=True, on=day) == 0.05
    # ST on ChiNext keeps 20 %
    assert limits.price_limit_pct("300001.SZ", is_st=True, on=day) == 0.20
    assert limits.limit_prices(10.0, "600000.SH") == (9.0, 11.0)
    assert limits.limit_prices(12.35, "600000.SH") == (11.12, 13.59)  # 13.585 rounds half up
    assert limits.limit_prices(10.0, "600000.SH", is_st=True, on=day) == (9.5, 10.5)


def test_bad_codes() -> None:
    for text in ("6005190", "abc", "600519.HK"):
        with pytest.raises(ValueError):
            boards.to_symbol(text)
    with pytest.raises(ValueError, match="6-digit"):
        boards.exchange_of("12345")
    assert (
        boards.symbol_or_text("6005x") == "6005x" and boards.symbol_or_text(600519) == "600519.SH"
    )


MEMBERSHIP = pd.DataFrame(
    {
        "effective_date": pd.to_datetime(["2024-06-17"] * 2 + ["2024-12-16"] * 2),
        "symbol": ["600519.SH", "000001.SZ", "600519.SH", "300750.SZ"],
        "name": [""] * 4,
    }
)


def test_members_on_is_point_in_time() -> None:
    assert members_on(MEMBERSHIP, "2024-06-14") == []
    assert members_on(MEMBERSHIP, "2024-06-17") == ["000001.SZ", "600519.SH"]
    assert members_on(MEMBERSHIP, "2024-12-13") == ["000001.SZ", "600519.SH"]
    assert members_on(MEMBERSHIP, "2025-01-02") == ["300750.SZ", "600519.SH"]
    assert members_on(MEMBERSHIP.iloc[:0], "2025-01-02") == []


def test_members_between_includes_leavers_and_joiners() -> None:
    assert members_between(MEMBERSHIP, "2024-07-01", "2025-01-31") == [
        "000001.SZ",
        "300750.SZ",
        "600519.SH",
    ]
    assert members_between(MEMBERSHIP, "2025-01-01", "2025-01-31") == ["300750.SZ", "600519.SH"]
    assert members_between(MEMBERSHIP.iloc[:0], "2025-01-01", "2025-01-31") == []


def test_membership_from_changes_replays_adds_and_removals() -> None:
    changes = pd.DataFrame(
        {
            "code": ["000001", "300750", "601058", "600837"],
            "start_date": ["2005-04-08", "2024-12-16", "2025-02-07", "2010-01-04"],
            "end_date": ["2024-12-16", None, None, "2025-02-07"],
        }
    )
    snapshots = membership_from_changes(["600519", "000001", "600837"], "2024-06-17", changes)
    by_date = snapshots.groupby("effective_date")["symbol"].apply(list).to_dict()
    assert by_date[pd.Timestamp("2024-06-17")] == ["000001.SZ", "600519.SH", "600837.SH"]
    assert by_date[pd.Timestamp("2024-12-16")] == ["300750.SZ", "600519.SH", "600837.SH"]
    assert by_date[pd.Timestamp("2025-02-07")] == ["300750.SZ", "600519.SH", "601058.SH"]
