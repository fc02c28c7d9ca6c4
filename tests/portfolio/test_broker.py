"""PaperBroker on hand-made markets: lots, odd lots, limits per board, suspension, T+1, ADV cap,
cash."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomrl.errors import DataValidationError
from oomrl.market.rules import AShareRules, FillPrice
from oomrl.portfolio.broker import PaperBroker, Unfilled
from oomrl.portfolio.market import MarketFrames, panels_from_bars
from tests.portfolio.factories import flat_bars, flat_panels, random_panels, set_cell

MAIN, CHINEXT, STAR, ST = "600000.SH", "300750.SZ", "688981.SH", "600001.SH"
DAY = 25  # a session with 20+ sessions of history (ADV and volatility known)


def broker_for(
    panels: dict[str, pd.DataFrame],
    rules: AShareRules | None = None,
    st_symbols: tuple[str, ...] = (),
) -> PaperBroker:
    rules = rules or AShareRules(fill_price=FillPrice.CLOSE)
    return PaperBroker(MarketFrames.build(panels, rules, st_symbols), rules)


def one(
    broker: PaperBroker,
    symbol: str,
    quantity: int,
    held: int = 0,
    cash: float = 1e7,
    bought_today: int = 0,
) -> dict[str, float]:
    """Execute a single order and return that symbol's fill as a dict."""
    symbols = broker.market.symbols
    orders = np.zeros(len(symbols), dtype=np.int64)
    holding = np.zeros(len(symbols), dtype=np.int64)
    today = np.zeros(len(symbols), dtype=np.int64)
    i = symbols.get_loc(symbol)
    orders[i], holding[i], today[i] = quantity, held, bought_today
    ex = broker.execute(DAY, orders, holding, int(cash * 100), today)
    return {
        "filled": int(ex.filled[i]),
        "price": float(ex.price[i]),
        "frictionless": float(ex.frictionless_price[i]),
        "value": float(ex.value[i]),
        "commission": float(ex.commission[i]),
        "stamp": float(ex.stamp_duty[i]),
        "transfer": float(ex.transfer_fee[i]),
        "impact": float(ex.impact_cost[i]),
        "reason": Unfilled(int(ex.reason[i])),
        "cash_after": ex.cash_after_fen / 100,
        "participation": float(ex.adv_participation[i]),
    }


def test_buy_costs_hand_computed() -> None:
    fill = one(broker_for(flat_panels([MAIN])), MAIN, 1000)
    # 1000 x 10.00 x (1 + 0.0005 half-spread) = 10,005.00; commission min 5; transfer 0.10.
    assert (fill["filled"], fill["price"], fill["value"]) == (1000, pytest.approx(10.005), 10005.0)
    assert (fill["commission"], fill["stamp"], fill["transfer"], fill["impact"]) == (
        5.0,
        0.0,
        0.1,
        5.0,
    )
    assert fill["frictionless"] == 10.0
    assert fill["cash_after"] == pytest.approx(1e7 - 10005.0 - 5.0 - 0.1)
    assert fill["participation"] == pytest.approx(10_000 / 1e7)


def test_sell_costs_hand_computed_with_stamp_duty() -> None:
    fill = one(broker_for(flat_panels([MAIN])), MAIN, -1000, held=1000)
    # 9,995.00 proceeds; stamp 0.05 % = 4.9975 -> 5.00; commission 5.00; transfer 0.10.
    assert (fill["value"], fill["commission"], fill["stamp"], fill["transfer"]) == (
        9995.0,
        5.0,
        5.0,
        0.1,
    )
    assert fill["cash_after"] == pytest.approx(1e7 + 9995.0 - 10.1)


def test_stamp_duty_before_the_2023_cut_is_one_tenth_percent() -> None:
    panels = flat_panels([MAIN], start="2023-06-01")
    fill = one(broker_for(panels), MAIN, -10_000, held=10_000)
    assert panels["close"].index[DAY] < pd.Timestamp("2023-08-28")
    assert fill["stamp"] == pytest.approx(round(fill["value"] * 0.001, 2))


def test_buys_round_down_to_lots_and_odd_lots_sell_only_whole() -> None:
    broker = broker_for(flat_panels([MAIN]))
    assert one(broker, MAIN, 12_345)["filled"] == 12_300
    assert one(broker, MAIN, 12_345)["reason"] is Unfilled.LOT
    assert one(broker, MAIN, -150, held=150)["filled"] == -150  # the whole odd lot at once
    assert one(broker, MAIN, -120, held=250)["filled"] == -100  # partial sells in lots


@pytest.mark.parametrize(
    ("symbol", "is_st", "blocked_at", "fills_at"),
    [
        (MAIN, False, 11.00, 10.99),
        (CHINEXT, False, 12.00, 11.99),
        (STAR, False, 12.00, 11.99),
        (ST, True, 10.50, 10.49),
    ],
)
def test_no_buy_at_limit_up_per_board(
    symbol: str, is_st: bool, blocked_at: float, fills_at: float
) -> None:
    for price, blocked in ((blocked_at, True), (fills_at, False)):
        panels = flat_panels([symbol])
        set_cell(panels, DAY, symbol, close=price)
        fill = one(broker_for(panels, st_symbols=(symbol,) if is_st else ()), symbol, 1000)
        assert (fill["reason"] is Unfilled.LIMIT_UP) is blocked
        assert fill["filled"] == (0 if blocked else 1000)
        if not blocked:  # impact never lifts a fill above the limit price
            assert fill["price"] <= blocked_at


@pytest.mark.parametrize(
    ("symbol", "is_st", "blocked_at"),
    [(MAIN, False, 9.00), (CHINEXT, False, 8.00), (STAR, False, 8.00), (ST, True, 9.50)],
)
def test_no_sell_at_limit_down_per_board(symbol: str, is_st: bool, blocked_at: float) -> None:
    panels = flat_panels([symbol])
    set_cell(panels, DAY, symbol, close=blocked_at)
    fill = one(broker_for(panels, st_symbols=(symbol,) if is_st else ()), symbol, -1000, held=1000)
    assert (fill["filled"], fill["reason"]) == (0, Unfilled.LIMIT_DOWN)


def test_limits_lots_and_fees_act_on_raw_prices_from_the_factor() -> None:
    # Adjusted closes at 10.00; factor 0.5 (adjusted = raw x factor): raw 20.00
    panels = flat_panels([MAIN])
    panels["factor"] = panels["close"] * 0 + 0.5
    set_cell(panels, DAY, MAIN, close=11.0)  # raw 22.00 = 20.00 + 10 %: the limit
    assert one(broker_for(panels), MAIN, 1000)["reason"] is Unfilled.LIMIT_UP
    set_cell(panels, DAY, MAIN, close=10.99)  # raw 21.98
    fill = one(broker_for(panels), MAIN, 1000)
    assert (fill["filled"], fill["frictionless"]) == (1000, 21.98)
    assert fill["value"] == pytest.approx(round(1000 * 21.98 * 1.0005, 2))


def test_suspended_day_blocks_both_sides() -> None:
    bars = flat_bars([MAIN, CHINEXT])
    day = bars["date"].drop_duplicates().iloc[DAY]
    bars = bars[~((bars["date"] == day) & (bars["symbol"] == MAIN))]  # no bar = suspended
    broker = broker_for(panels_from_bars(bars))
    assert one(broker, MAIN, 1000)["reason"] is Unfilled.SUSPENDED
    assert one(broker, MAIN, -1000, held=1000)["filled"] == 0
    panels = flat_panels([MAIN])
    set_cell(panels, DAY, MAIN, volume=0.0)  # a zero-volume bar is a suspension too
    assert one(broker_for(panels), MAIN, 1000)["reason"] is Unfilled.SUSPENDED


def test_t_plus_one_shares_bought_today_cannot_be_sold() -> None:
    broker = broker_for(flat_panels([MAIN]))
    fill = one(broker, MAIN, -1000, held=1000, bought_today=700)
    assert (fill["filled"], fill["reason"]) == (-300, Unfilled.T_PLUS_ONE)
    relaxed = broker_for(
        flat_panels([MAIN]), AShareRules(fill_price=FillPrice.CLOSE, t_plus_one=False)
    )
    assert one(relaxed, MAIN, -1000, held=1000, bought_today=700)["filled"] == -1000


def test_adv_cap_fills_part_and_reports_the_rest() -> None:
    broker = broker_for(flat_panels([MAIN], volume=1e5))  # ADV 1e6 CNY: 10 % is 10,000 shares
    fill = one(broker, MAIN, 50_000)
    assert (fill["filled"], fill["reason"]) == (10_000, Unfilled.ADV_CAP)
    assert fill["participation"] == pytest.approx(0.10)


def test_no_adv_history_means_no_trade() -> None:
    broker = broker_for(flat_panels([MAIN]))
    orders = np.array([1000])
    ex = broker.execute(1, orders, np.array([0]), 10**9)  # one session of history < 5 needed
    assert (ex.filled[0], Unfilled(int(ex.reason[0]))) == (0, Unfilled.NO_ADV)


def test_buys_shrink_to_fit_the_cash_and_cash_stays_non_negative() -> None:
    fill = one(broker_for(flat_panels([MAIN])), MAIN, 1000, cash=5000.0)
    assert (fill["filled"], fill["reason"]) == (400, Unfilled.CASH)  # 500 would cost 5,007.55
    assert fill["cash_after"] == pytest.approx(5000 - 4002.0 - 5.0 - 0.04)
    assert one(broker_for(flat_panels([MAIN])), MAIN, 100, cash=900.0)["filled"] == 0


def test_sell_proceeds_fund_same_day_buys() -> None:
    broker = broker_for(flat_panels([MAIN, CHINEXT]))
    assert list(broker.market.symbols) == [CHINEXT, MAIN]
    ex = broker.execute(DAY, np.array([-1000, 1000]), np.array([1000, 0]), cash_fen=0)
    assert ex.filled.tolist() == [-1000, 900]  # 9,984.90 of proceeds buy 900 shares
    assert ex.cash_after_fen >= 0


def test_fill_price_policies_and_vwap_proxy() -> None:
    panels = flat_panels([MAIN])
    set_cell(panels, DAY, MAIN, open=9.8, high=10.4, low=9.7, close=10.2, amount=10.1e6)
    for policy, expected in (
        (FillPrice.OPEN, 9.8),
        (FillPrice.CLOSE, 10.2),
        (FillPrice.VWAP, 10.1),
    ):
        market = MarketFrames.build(panels, AShareRules(fill_price=policy))
        assert market.fill_price[DAY, 0] == pytest.approx(expected)
    set_cell(panels, DAY, MAIN, amount=99e6)  # amount on another basis: typical price instead
    market = MarketFrames.build(panels, AShareRules(fill_price=FillPrice.VWAP))
    assert market.fill_price[DAY, 0] == pytest.approx((10.4 + 9.7 + 10.2) / 3)


def test_orders_for_weights_size_on_the_previous_close() -> None:
    broker = broker_for(flat_panels([MAIN, CHINEXT]))
    orders = broker.orders_for_weights(DAY, np.array([0.5, 0.0]), np.array([0, 300]), 1e6)
    assert orders.tolist() == [50_000, -300]


def test_bad_market_data_is_refused() -> None:
    panels = flat_panels([MAIN])
    set_cell(panels, 3, MAIN, close=-1.0)
    with pytest.raises(DataValidationError, match="positive"):
        MarketFrames.build(panels, AShareRules())
    with pytest.raises(DataValidationError, match="price limit"):
        MarketFrames.build(flat_panels(["BOGUS"]), AShareRules())
    with pytest.raises(DataValidationError, match="close"):
        MarketFrames.build({"open": panels["close"]}, AShareRules())
    with pytest.raises(DataValidationError, match="duplicate"):
        panels_from_bars(pd.concat([flat_bars([MAIN], 2)] * 2))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-30_000, 30_000)), min_size=1, max_size=12),
    st.integers(0, 5_000_000),
)
@pytest.mark.slow
def test_value_is_conserved_up_to_costs(orders: list[tuple[int, int]], cash: int) -> None:
    """cash + holdings at the frictionless price drop by exactly the recorded costs (to the fen)."""
    panels = random_panels([MAIN, CHINEXT, STAR, ST], days=40)
    rules = AShareRules()
    broker = PaperBroker(MarketFrames.build(panels, rules), rules)
    held = np.full(4, 20_000, dtype=np.int64)
    cash_fen = cash * 100
    for step, (i, qty) in enumerate(orders):
        t = 25 + step
        request = np.zeros(4, dtype=np.int64)
        request[i] = qty
        ex = broker.execute(t, request, held, cash_fen)
        price = np.nan_to_num(broker.market.fill_price[t])
        before = cash_fen / 100 + float(held @ price)
        held = held + ex.filled
        after = ex.cash_after_fen / 100 + float(held @ price)
        assert ex.cash_after_fen >= 0
        assert (held >= 0).all()
        assert before - after == pytest.approx(
            ex.total_costs, abs=0.01 * max(1, (ex.filled != 0).sum())
        )
        cash_fen = ex.cash_after_fen
