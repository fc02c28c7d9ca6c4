"""Board lots and dated price limits on real dates: STAR 200 + 1-share steps, ChiNext's 2020 reform,
ST, listing days."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from oomrl.market import calendar, limits, lots
from oomrl.market.boards import board_of, risk_warning
from oomrl.market.lots import BSE_LOT, ROUND_LOT, STAR_LOT
from oomrl.market.rules import AShareRules


def buy(quantity: int, rule: lots.LotRule) -> int:
    return int(lots.round_buy(quantity, rule.minimum, rule.step))


def sell(quantity: int, held: int, rule: lots.LotRule) -> int:
    return int(lots.round_sell(quantity, held, rule.minimum, rule.step))


def test_star_buys_start_at_200_then_go_in_single_shares() -> None:
    assert buy(150, STAR_LOT) == 0  # below the minimum: nothing
    assert buy(200, STAR_LOT) == 200 and buy(251, STAR_LOT) == 251
    assert buy(12_345, ROUND_LOT) == 12_300 and buy(99, ROUND_LOT) == 0
    assert buy(150, BSE_LOT) == 150 and buy(99, BSE_LOT) == 0


def test_a_star_sell_that_would_leave_150_sells_everything() -> None:
    assert sell(200, 350, STAR_LOT) == 350  # 150 left would be under the minimum
    assert sell(150, 350, STAR_LOT) == 0  # under 200 and not the whole holding: no legal sell
    assert sell(50, 150, STAR_LOT) == 150  # a holding under 200 goes in one piece
    assert sell(300, 600, STAR_LOT) == 300  # 300 left: fine
    assert sell(250, 250, ROUND_LOT) == 250 and sell(120, 250, ROUND_LOT) == 100
    assert sell(180, 250, ROUND_LOT) == 100  # rounds down, 150 left
    assert sell(210, 250, ROUND_LOT) == 250  # 200 would leave an odd 50: all of it
    assert sell(500, 300, ROUND_LOT) == 300  # never more than is held


def test_legality_follows_the_exchange_rules() -> None:
    legal_sell = lots.is_legal_sell
    assert legal_sell(150, 350, 200, 1).item() is False  # STAR: under 200, not the whole holding
    assert legal_sell(200, 350, 200, 1).item() and legal_sell(350, 350, 200, 1).item()
    assert legal_sell(150, 250, 100, 100).item()  # main board: a lot plus the whole odd remainder
    assert legal_sell(50, 250, 100, 100).item()  # the odd remainder alone
    assert not legal_sell(120, 250, 100, 100).item() and not legal_sell(300, 250, 100, 100).item()
    assert not lots.is_legal_buy(150, 200, 1).item() and lots.is_legal_buy(201, 200, 1).item()
    with pytest.raises(ValueError):
        lots.LotRule(0, 1)


def test_lot_rules_per_board_and_a_forced_round_lot() -> None:
    minimum, step = AShareRules().lot_rules(["600000.SH", "300750.SZ", "688981.SH", "830799.BJ"])
    assert minimum.tolist() == [100, 100, 200, 100] and step.tolist() == [100, 100, 1, 1]
    assert AShareRules(lot_size=1).lot_rules(["688981.SH"])[0].tolist() == [1]


def fraction(board: int, day: date, st: bool = False) -> float:
    return float(limits.limit_fraction(board, np.array([day], dtype="datetime64[D]"), st)[0])


def test_chinext_goes_from_10_to_20_percent_on_2020_08_24() -> None:
    assert calendar.is_session("2020-08-21") and calendar.is_session("2020-08-24")
    assert fraction(limits.CHINEXT, date(2020, 8, 21)) == 0.10
    assert fraction(limits.CHINEXT, date(2020, 8, 24)) == 0.20
    assert fraction(limits.CHINEXT, date(2020, 8, 21), st=True) == 0.05
    assert fraction(limits.CHINEXT, date(2020, 8, 24), st=True) == 0.20  # ST keeps the board's 20 %


def test_main_board_st_is_5_percent_until_the_2026_rules_take_effect() -> None:
    # The day the change was announced
    assert fraction(limits.MAIN, date(2025, 6, 27), st=True) == 0.05
    assert fraction(limits.MAIN, date(2026, 7, 3), st=True) == 0.05
    assert fraction(limits.MAIN, date(2026, 7, 6), st=True) == 0.10
    assert fraction(limits.MAIN, date(2026, 7, 3)) == 0.10
    assert fraction(limits.STAR, date(2024, 1, 2), st=True) == 0.20
    assert fraction(limits.BSE, date(2024, 1, 2)) == 0.30


def test_an_st_name_on_a_date_sets_the_flag() -> None:
    names = ["ST东时", "*ST天茂", "S*ST前锋", "SST中纺", "贵州茅台", "STAR", "万科Ａ"]
    assert [risk_warning(name) for name in names] == [True, True, True, True, False, False, False]


def test_an_st_name_on_a_date_sets_that_days_limit() -> None:
    """The name a security carries on a date (as akshare reports it) decides the day's limit.

    *ST国华 is the name in the akshare fixture; the ChiNext and STAR names are made up for the
    rule."""

    def on(symbol: str, name: str, day: str) -> float:
        board = limits.BOARD_CODE[board_of(symbol)]
        return float(
            limits.limit_fractions(
                board,
                np.array([day], dtype="datetime64[ns]"),
                risk_warning(name),
                np.array([np.nan]),
                np.array(["NaT"], dtype="datetime64[ns]"),
            )[0]
        )

    assert on("000004.SZ", "*ST国华", "2024-07-03") == 0.05  # main board under risk warning
    assert on("000004.SZ", "国华网安", "2024-07-03") == 0.10  # the same code without the prefix
    assert on("000004.SZ", "*ST国华", "2026-07-06") == 0.10  # the 2026 rules: ST trades at ±10 %
    assert (
        on("300001.SZ", "ST特锐", "2020-08-21") == 0.05
        and on("300001.SZ", "ST特锐", "2020-08-24") == 0.20
    )
    assert on("688001.SH", "ST华兴", "2024-07-03") == 0.20  # STAR ST keeps the board's 20 %


def listing_fraction(board: int, listed: str, day: str) -> float:
    session = calendar.session_numbers(
        np.array([day], dtype="datetime64[ns]"), np.array([listed], dtype="datetime64[ns]")
    )
    return float(
        limits.limit_fractions(
            board,
            np.array([day], dtype="datetime64[ns]"),
            False,
            session,
            np.array([listed], dtype="datetime64[ns]"),
        )[0]
    )


def test_listing_days_trade_without_limits_by_board_and_era() -> None:
    # 001391.SZ (main board, registration era) listed 2024-12-30: five free sessions, then 10 %.
    assert np.isnan(listing_fraction(limits.MAIN, "2024-12-30", "2024-12-30"))
    assert np.isnan(listing_fraction(limits.MAIN, "2024-12-30", "2025-01-06"))  # 5th session
    assert listing_fraction(limits.MAIN, "2024-12-30", "2025-01-07") == 0.10  # 6th
    # A main-board relisting before 2023-04-10 (000792.SZ on 2021-08-10): only the first day is
    # free.
    assert np.isnan(listing_fraction(limits.MAIN, "2021-08-10", "2021-08-10"))
    assert listing_fraction(limits.MAIN, "2021-08-10", "2021-08-11") == 0.10
    # ChiNext: one free day before the reform, five from 2020-08-24; STAR always five.
    assert listing_fraction(limits.CHINEXT, "2020-08-10", "2020-08-11") == 0.10
    assert np.isnan(listing_fraction(limits.CHINEXT, "2020-08-24", "2020-08-28"))
    assert listing_fraction(limits.CHINEXT, "2020-08-24", "2020-08-31") == 0.20
    assert np.isnan(listing_fraction(limits.STAR, "2019-07-22", "2019-07-26"))
    assert np.isnan(listing_fraction(limits.BSE, "2021-11-15", "2021-11-15"))
    assert listing_fraction(limits.BSE, "2021-11-15", "2021-11-16") == 0.30
    unknown = limits.limit_fractions(
        limits.MAIN,
        np.array(["2024-12-30"], dtype="datetime64[ns]"),
        False,
        np.array([np.nan]),
        np.array(["NaT"], dtype="datetime64[ns]"),
    )
    assert unknown.tolist() == [0.10]  # no listing date known: treated as long listed


def test_limit_prices_round_half_up_in_fen() -> None:
    down, up = limits.limit_prices_fen(np.array([1235, 1000, 1000]), np.array([0.10, 0.05, np.nan]))
    assert up[:2].tolist() == [1359, 1050] and down[:2].tolist() == [1112, 950]  # 13.585 -> 13.59
    assert down[2] == 0 and up[2] > 10**12  # no limit


def test_session_numbers_count_exchange_sessions() -> None:
    got = calendar.session_numbers(
        np.array(["2024-10-08", "2024-09-27", "2024-09-26"], dtype="datetime64[ns]"),
        np.array(["2024-09-27", "2024-09-27", "NaT"], dtype="datetime64[ns]"),
    )
    assert got[:2].tolist() == [3.0, 1.0] and np.isnan(got[2])  # 09-27, 09-30, (holiday), 10-08
