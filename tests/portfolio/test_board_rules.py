"""The broker under board lots, dated limits, ST and listing days from the data, raw prices and
corporate actions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from oomrl.market.markets import GenericRules
from oomrl.market.rules import AShareRules, FillPrice
from oomrl.portfolio.actions import apply_actions
from oomrl.portfolio.audit import audit_fills
from oomrl.portfolio.broker import PaperBroker, Unfilled
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.replay import replay
from oomrl.portfolio.setup import RebalanceSetup
from tests.portfolio.factories import flat_panels, random_panels, set_cell
from tests.portfolio.inprocess import InProcessStrategy
from tests.portfolio.test_broker import DAY, broker_for, one

MAIN, CHINEXT, STAR, BSE = "600000.SH", "300750.SZ", "688981.SH", "830799.BJ"
SYMBOLS = ["600000.SH", "600036.SH", "000001.SZ", "300750.SZ", "688981.SH", "601318.SH"]


def test_star_buy_of_150_fills_nothing_and_a_sell_leaving_150_sells_all() -> None:
    broker = broker_for(flat_panels([STAR]))
    assert (one(broker, STAR, 150)["filled"], one(broker, STAR, 150)["reason"]) == (0, Unfilled.LOT)
    assert one(broker, STAR, 201)["filled"] == 201  # 1-share steps above 200
    assert one(broker, STAR, -200, held=350)["filled"] == -350
    assert one(broker, STAR, -50, held=150)["filled"] == -150
    assert one(broker, STAR, -150, held=350)["reason"] is Unfilled.LOT


def test_bse_lots_and_thirty_percent_limits() -> None:
    broker = broker_for(flat_panels([BSE]))
    assert one(broker, BSE, 150)["filled"] == 150
    panels = flat_panels([BSE])
    set_cell(panels, DAY, BSE, close=13.0)  # +30 %
    assert one(broker_for(panels), BSE, 100)["reason"] is Unfilled.LIMIT_UP


def test_a_sweep_never_breaks_the_adv_cap() -> None:
    broker = broker_for(flat_panels([STAR], volume=3000))  # ADV 30,000 CNY: the cap is 300 shares
    fill = one(broker, STAR, -300, held=400)  # 300 would leave 100 < 200, all 400 is over the cap
    assert fill["filled"] == -200  # leaves 200, the minimum


def test_chinext_limit_is_dated() -> None:
    for start, blocked in (("2020-07-17", True), ("2020-07-20", False)):
        # DAY is 2020-08-21 (Friday) or 2020-08-24 (Monday)
        panels = flat_panels([CHINEXT], start=start)
        set_cell(panels, DAY, CHINEXT, close=11.0)  # +10 %
        assert (one(broker_for(panels), CHINEXT, 100)["reason"] is Unfilled.LIMIT_UP) is blocked


def test_st_and_listing_days_come_from_the_data() -> None:
    panels = flat_panels([MAIN], start="2024-06-03")
    panels["st"] = panels["close"] * 0.0
    set_cell(panels, DAY, MAIN, close=10.5, st=1.0)  # +5 % on an ST day: limit-up
    assert one(broker_for(panels), MAIN, 100)["reason"] is Unfilled.LIMIT_UP
    set_cell(panels, DAY, MAIN, st=0.0)
    assert one(broker_for(panels), MAIN, 100)["filled"] == 100
    listed = panels["close"].index[DAY - 2]
    panels["list_date"] = panels["close"] * 0.0 + float(listed.strftime("%Y%m%d"))
    set_cell(panels, DAY, MAIN, close=12.0)  # +20 % on its third session: no limit yet
    assert one(broker_for(panels), MAIN, 100)["filled"] == 100


def test_corporate_actions_keep_value_dividend_cash_and_bonus_shares() -> None:
    held = np.array([1000, 1000, 0])
    done = apply_actions(held, np.array([1.02, 1.5, 1.3]), np.array([10.2, 15.0, 9.0]))
    assert done.held.tolist() == [1000, 1500, 0]
    assert done.cash_fen.tolist() == [20_000, 0, 0]  # 1000 x 10.20 x (1 - 1/1.02) = 200.00 CNY
    odd = apply_actions(np.array([333]), np.array([1.5]), np.array([15.0]))
    assert odd.held.tolist() == [499] and odd.cash_fen.tolist() == [500]  # 0.5 share x 10.00


def test_a_replay_follows_adjusted_returns_through_an_ex_date() -> None:
    panels = flat_panels([MAIN], days=40)
    factor = pd.Series(0.98, index=panels["close"].index)
    factor.iloc[30:] = 1.0  # ex-date at session 30: raw drops 10.204 -> 10.00, adjusted stays 10.00
    panels["factor"] = panels["close"] * 0 + factor.to_numpy()[:, None]
    rules = AShareRules(
        fill_price=FillPrice.CLOSE,
        half_spread=0.0,
        impact_k=0.0,
        commission_min=0.0,
        commission_rate=0.0,
        transfer_fee_rate=0.0,
        stamp_duty_rate=0.0,
    )
    result = replay(
        InProcessStrategy.bundled("daily_momentum"),
        {"top_k": 1},
        panels,
        panels["close"].index[25],
        panels["close"].index[39],
        rules,
        initial_cash=1e6,
    )
    assert len(result.actions) == 1 and result.actions["kind"].iloc[0] == "dividend"
    nav = result.nav.set_index("date")["nav"]
    assert nav.iloc[-1] == pytest.approx(nav.iloc[0], rel=1e-3)  # flat adjusted prices: flat NAV
    assert result.actions["cash_fen"].iloc[0] > 0


def test_audit_flags_illegal_fills() -> None:
    market = MarketFrames.build(flat_panels([STAR, MAIN]), AShareRules())
    day = market.dates[DAY]
    fills = pd.DataFrame(
        {
            "date": [day, day, market.dates[DAY + 1], day, day],
            "symbol": [STAR, MAIN, STAR, MAIN, MAIN],
            "side": ["buy", "buy", "sell", "sell", "buy"],
            "quantity": [150, 100, 100, 100, 100],
            "price": 10.0,
        }
    )
    found = audit_fills(fills, market, AShareRules())
    assert sorted(found["rule"]) == [
        "lot",
        "lot",
        "t_plus_one",
    ]  # STAR 150; STAR sell of 100 (150 held); T+1
    assert audit_fills(fills.iloc[:0], market, AShareRules()).empty


def test_generic_rules_one_lot_taxes_and_no_limits() -> None:
    rules = GenericRules(
        lot_size=1,
        commission_rate=0.0,
        commission_min=0.0,
        sell_tax_rate=0.0000278,
        fill_price=FillPrice.CLOSE,
    )
    panels = flat_panels(["AAPL"], start="2024-06-03")
    set_cell(panels, DAY, "AAPL", close=15.0)  # +50 %: no limit outside China
    broker = PaperBroker(MarketFrames.build(panels, rules), rules)
    assert one(broker, "AAPL", 7)["filled"] == 7
    sold = one(broker, "AAPL", -7, held=7, bought_today=7)  # no T+1
    assert sold["filled"] == -7 and sold["stamp"] == pytest.approx(
        round(sold["value"] * 0.0000278, 2)
    )
    assert sold["commission"] == 0.0


@pytest.mark.slow
def test_the_ledger_books_corporate_actions_and_reconciles(ledger: Ledger) -> None:
    from oomrl.portfolio.rebalance import advance

    panels = random_panels(SYMBOLS, days=80)
    factor = pd.DataFrame(0.97, index=panels["close"].index, columns=panels["close"].columns)
    factor.iloc[45:, :3] = 1.0  # a 3 % dividend on three names
    factor.iloc[60:, 3] = 0.97 * 1.5  # a bonus issue (ratio 1.5) on the fourth
    panels["factor"] = factor
    days = [d.date() for d in panels["close"].index]
    ledger.open_account("acc", 1_000_000)
    weekly = RebalanceSetup(
        InProcessStrategy.bundled("daily_momentum"), {"top_k": 6}, "v1", AShareRules()
    )
    advance(ledger, "acc", days[30], days[70], panels, weekly)
    booked = ledger.actions_frame("acc")
    assert set(booked["kind"]) == {"dividend", "shares"}
    assert (booked.loc[booked["kind"] == "shares", "shares_delta"] > 0).all()
    assert ledger.reconcile("acc") == []
    result = replay(
        weekly.strategy,
        weekly.params,
        panels,
        days[30],
        days[70],
        initial_cash=1_000_000,
        version="v1",
    )
    assert len(result.actions) == len(booked)
    assert result.actions["cash_fen"].sum() == booked["cash_fen"].sum()


def test_daily_marks_over_an_ex_date_and_the_next_rebalance_book_the_dividend_once(
    ledger: Ledger,
) -> None:
    from oomrl.portfolio.marking import mark_account
    from oomrl.portfolio.rebalance import rebalance

    panels = random_panels(SYMBOLS, days=70)
    factor = pd.DataFrame(0.97, index=panels["close"].index, columns=panels["close"].columns)
    factor.iloc[45:] = 1.0  # every name pays a 3 % dividend on session 45
    panels["factor"] = factor
    days = [d.date() for d in panels["close"].index]
    setup = RebalanceSetup(
        InProcessStrategy.bundled("daily_momentum"), {"top_k": 6}, "v1", AShareRules()
    )
    ledger.open_account("acc", 1_000_000)
    rebalance(ledger, "acc", days[40], panels, setup)
    mark_account(ledger, "acc", days[50], panels, AShareRules(), 0.2)
    marks = ledger.nav_frame("acc").set_index("date")
    # Paid in NAV
    assert marks.loc[pd.Timestamp(days[45]), "cash"] > marks.loc[pd.Timestamp(days[44]), "cash"]
    assert ledger.actions_frame("acc").empty  # booked with the next rebalance
    rebalance(ledger, "acc", days[55], panels, setup)
    booked = ledger.actions_frame("acc")
    assert (
        len(booked) == 6 and (booked["kind"] == "dividend").all() and ledger.reconcile("acc") == []
    )
    nav = ledger.nav_frame("acc")
    assert nav["date"].is_unique and len(nav) == 16  # sessions 40..55, each once
