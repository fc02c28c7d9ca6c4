"""The paper broker: turns orders into fills under a market's friction and lot rules.

It is vectorised over a day's symbols."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any, cast

import numpy as np
import pandas as pd

from oomrl.market.lots import round_buy, round_sell
from oomrl.market.rules import FrictionRules, cents_array, finite
from oomrl.portfolio import broker_kernel
from oomrl.portfolio.book import concat_columns
from oomrl.portfolio.broker_kernel import CASH_PASSES
from oomrl.portfolio.market import MarketFrames


class Unfilled(IntEnum):
    """Why (part of) an order did not fill."""

    NONE = 0
    SUSPENDED = 1
    LIMIT_UP = 2
    LIMIT_DOWN = 3
    T_PLUS_ONE = 4
    LOT = 5
    ADV_CAP = 6
    NO_ADV = 7
    CASH = 8


REASON_NAMES = np.array([code.name.lower() for code in Unfilled])
# Object arrays of str, what a frame holds. A frame of numpy str arrays converts them cell by cell.
REASON_LABELS = REASON_NAMES.astype(object)
SIDE_LABELS = np.array(["sell", "buy"], dtype=object)
FEE_FIELDS = ("commission", "stamp_duty", "transfer_fee")


@dataclass
class Execution:
    """One day's fills for every symbol (arrays aligned to MarketFrames.symbols)."""

    t: int
    date: pd.Timestamp
    requested: np.ndarray  # signed shares asked for
    filled: np.ndarray  # signed shares filled
    price: np.ndarray  # realized price (with impact and half-spread)
    frictionless_price: np.ndarray
    value: np.ndarray  # |filled| x price, in CNY to the fen
    commission: np.ndarray
    stamp_duty: np.ndarray
    transfer_fee: np.ndarray
    impact_cost: np.ndarray
    adv_participation: np.ndarray
    reason: np.ndarray  # Unfilled code of the part that did not fill
    cash_before_fen: int
    cash_after_fen: int

    @cached_property
    def cash_delta_fen(self) -> np.ndarray:
        """Signed cash change per symbol in fen.

        Sells bring value less fees; buys cost value plus fees."""
        return settled_fen(self.filled, self.value, self.fees)

    @property
    def fees(self) -> np.ndarray:
        """Explicit fees per symbol (commission + stamp duty + transfer fee)."""
        return cast(np.ndarray, self.commission + self.stamp_duty + self.transfer_fee)

    @property
    def traded_value(self) -> float:
        """Total value bought and sold (CNY)."""
        return float(self.value.sum())

    @property
    def total_costs(self) -> float:
        """Fees plus impact and half-spread (CNY)."""
        return float(self.fees.sum() + self.impact_cost.sum())

    def fills_frame(self, symbols: pd.Index) -> pd.DataFrame:
        """One row per fill, the columns of Ledger.fills_frame."""
        return pd.DataFrame(self.fill_columns(symbols))

    def fill_columns(self, symbols: pd.Index | np.ndarray) -> dict[str, np.ndarray]:
        """The fills as column arrays; `symbols` as an Index or as MarketFrames.symbol_names."""
        rows = np.nonzero(self.filled)[0]
        cells = _fill_cells([self], np.zeros(len(rows), dtype=np.int64), rows)
        return {"date": _dates(len(rows), self.date), "symbol": _names(symbols, rows), **cells}

    def orders_frame(self, symbols: pd.Index) -> pd.DataFrame:
        """One row per order: requested, filled and unfilled shares with the reason."""
        return pd.DataFrame(self.order_columns(symbols))

    def order_columns(self, symbols: pd.Index | np.ndarray) -> dict[str, np.ndarray]:
        """The orders as column arrays."""
        rows = np.nonzero(self.requested)[0]
        cells = _order_cells([self], np.zeros(len(rows), dtype=np.int64), rows)
        return {"date": _dates(len(rows), self.date), "symbol": _names(symbols, rows), **cells}


# Executions stacked at a time when tabulating a replay. Bounds the memory of the
# (events x symbols) stacks.
TABLE_BLOCK = 128


def session_tables(
    executions: list[Execution], dates: np.ndarray, names: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Fill and order columns of many executions, in session then symbol order.

    The result is what concatenating each one's fill_columns / order_columns gives. Those are
    empty dicts when nothing filled / was ordered. It takes a few array operations per block of
    executions instead of some thirty per session."""
    fills: list[dict[str, np.ndarray]] = []
    orders: list[dict[str, np.ndarray]] = []
    for begin in range(0, len(executions), TABLE_BLOCK):
        block = executions[begin : begin + TABLE_BLOCK]
        sessions = np.array([e.t for e in block], dtype=np.int64)
        for table, cells, field in (
            (fills, _fill_cells, "filled"),
            (orders, _order_cells, "requested"),
        ):
            event, rows = np.nonzero(_stacked(block, field))
            if len(rows):
                table.append(
                    {
                        "date": dates[sessions[event]],
                        "symbol": names[rows],
                        **cells(block, event, rows),
                    }
                )
    return (concat_columns(fills) if fills else {}), (concat_columns(orders) if orders else {})


def _stacked(block: list[Execution], field: str) -> np.ndarray:
    """One Execution field of a block of executions as an (executions x symbols) array.

    That is np.stack's result, by one concatenation. np.stack expands every array in Python
    first."""
    return np.concatenate([getattr(e, field) for e in block]).reshape(
        len(block), len(block[0].requested)
    )


def _cells(block: list[Execution], field: str, event: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Values of one Execution field at (execution, symbol) pairs."""
    if len(block) == 1:
        return cast(np.ndarray, np.asarray(getattr(block[0], field))[rows])
    return cast(np.ndarray, _stacked(block, field)[event, rows])


def _fill_cells(
    block: list[Execution], event: np.ndarray, rows: np.ndarray
) -> dict[str, np.ndarray]:
    """The fill columns after date and symbol, at the filled (execution, symbol) pairs."""
    filled = _cells(block, "filled", event, rows)
    value, fees = (
        _cells(block, "value", event, rows),
        [_cells(block, f, event, rows) for f in FEE_FIELDS],
    )
    columns = {
        "side": SIDE_LABELS[(filled > 0).view(np.int8)],
        "quantity": np.abs(filled).astype(np.int64),
    }
    columns.update({f: _cells(block, f, event, rows) for f in ("price", "frictionless_price")})
    columns.update(zip(FEE_FIELDS, fees, strict=True))
    columns.update({f: _cells(block, f, event, rows) for f in ("impact_cost", "adv_participation")})
    columns["cash_delta_fen"] = settled_fen(filled, value, fees[0] + fees[1] + fees[2])
    return columns


def _order_cells(
    block: list[Execution], event: np.ndarray, rows: np.ndarray
) -> dict[str, np.ndarray]:
    """The order columns after date and symbol, at the ordered (execution, symbol) pairs."""
    requested, filled = (
        _cells(block, "requested", event, rows),
        _cells(block, "filled", event, rows),
    )
    return {
        "side": SIDE_LABELS[(requested > 0).view(np.int8)],
        "requested": np.abs(requested).astype(np.int64),
        "filled": np.abs(filled).astype(np.int64),
        # A sell may take a little more than asked: a remainder under the minimum goes with it.
        "unfilled": np.maximum(np.abs(requested) - np.abs(filled), 0).astype(np.int64),
        "reason": REASON_LABELS[_cells(block, "reason", event, rows)],
    }


def settled_fen(filled: np.ndarray, value: np.ndarray, fees: np.ndarray) -> np.ndarray:
    """Signed cash change per fill in fen.

    Sells bring value less fees; buys cost value plus fees."""
    value_fen = np.rint(value * 100).astype(np.int64)
    fees_fen = np.rint(fees * 100).astype(np.int64)
    return np.where(
        filled < 0, value_fen - fees_fen, np.where(filled > 0, -value_fen - fees_fen, 0)
    )


def _kernel_layout(values: np.ndarray) -> np.ndarray:
    """`values` as a writable C-ordered array (itself when it is one)."""
    return np.require(values, requirements=("C", "W"))


def _dates(count: int, day: pd.Timestamp) -> np.ndarray:
    """The date column: datetime64 (what a frame makes of Timestamps), object when empty as
    before."""
    return np.full(count, day.to_datetime64() if count else day)


def _names(symbols: pd.Index | np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The symbol column: the names of positions `rows` as str."""
    if isinstance(symbols, np.ndarray):
        return cast(np.ndarray, symbols[rows])
    return np.asarray(symbols[rows].astype(str), dtype=object)


@dataclass(slots=True)
class Quote:
    """One session's per-symbol fill inputs, read once per execution (rows of MarketFrames, or a
    subset)."""

    price: np.ndarray  # frictionless raw fill price
    adv: np.ndarray
    scale: np.ndarray  # k x sigma of the impact model
    ceiling: np.ndarray  # impact never pushes a buy above the limit-up price (or the price itself)
    floor: np.ndarray  # nor a sell below the limit-down price

    def take(self, rows: np.ndarray) -> Quote:
        """The quote of some symbols only (positions `rows`)."""
        return Quote(
            self.price[rows], self.adv[rows], self.scale[rows], self.ceiling[rows], self.floor[rows]
        )


@dataclass(slots=True)
class Side:
    """One side's orders (buys or sells) priced on its own symbols."""

    qty: np.ndarray
    realized: np.ndarray
    value: np.ndarray
    participation: np.ndarray
    fees: np.ndarray  # (3, n) commission, tax, transfer fee

    def settled_fen(self, buy: bool) -> int:
        """In fen: what the buys cost (value plus fees) or the sells bring (value less fees)."""
        fees = self.fees[0] + self.fees[1] + self.fees[2]
        return int(np.rint((self.value + fees if buy else self.value - fees) * 100).sum())


class PaperBroker:
    """Fills orders on one session of a MarketFrames under its market's rules.

    Cash never goes negative. `execute` runs the compiled loop of oomrl.portfolio.broker_kernel
    when numba is there (same results to the bit). Else it runs these numpy rules.
    `kernel=False` forces the numpy rules.
    """

    def __init__(self, market: MarketFrames, rules: FrictionRules, kernel: bool = True) -> None:
        self.market = market
        self.rules = rules
        self.kernel = broker_kernel.COMPILED if kernel else None
        self._no_buys = np.zeros(len(market.symbols), dtype=np.int64)
        self._rule_rates = tuple(
            float(x)
            for x in (
                rules.max_adv_participation,
                rules.impact_k,
                rules.half_spread,
                rules.commission_rate,
                rules.commission_min,
                rules.transfer_fee_rate,
            )
        )

    def orders_for_weights(
        self, t: int, weights: np.ndarray, held: np.ndarray, nav: float
    ) -> np.ndarray:
        """Signed share orders that move `held` towards target `weights` of `nav`.

        They are sized on t-1's raw close."""
        reference = self._reference(t)
        with np.errstate(invalid="ignore", divide="ignore"):
            target = np.where(
                np.isfinite(reference) & (reference > 0), np.floor(weights * nav / reference), 0.0
            )
        target = np.where(weights > 0, target, 0.0)
        # Where no price is known the holding is left alone rather than sold blind.
        target = np.where(np.isfinite(reference) | (weights > 0), target, held)
        return cast(np.ndarray, (target - held).astype(np.int64))

    def quote(self, t: int) -> Quote:
        """Session t's fill prices, ADV, impact scale and the limit bounds of impact."""
        m = self.market
        price = m.fill_price[t]
        up, down = m.limit_up[t], m.limit_down[t]
        return Quote(
            price,
            m.adv[t],
            self.rules.impact_scale(m.sigma[t]),
            np.where(np.isfinite(up), np.fmax(up, price), np.inf),
            np.where(np.isfinite(down), np.fmin(down, price), 0.0),
        )

    def execute(
        self,
        t: int,
        orders: np.ndarray,
        held: np.ndarray,
        cash_fen: int,
        bought_today: np.ndarray | None = None,
    ) -> Execution:
        """Fill signed share `orders` on session t: sells first, then buys within the cash."""
        m, rules = self.market, self.rules
        orders = np.ascontiguousarray(orders, dtype=np.int64)
        held = np.ascontiguousarray(held, dtype=np.int64)
        if self.kernel is not None:
            self._check_lengths(orders=orders, held=held, bought_today=bought_today)
            fills = self.kernel["fill_session"](
                orders, held, *self._kernel_inputs(t, cash_fen, bought_today)
            )
            return self._execution(t, orders, cash_fen, fills)
        quote = self.quote(t)
        qty = np.abs(orders)
        buys, sells = orders > 0, orders < 0
        reason = self._blocked(t, orders != 0, buys, sells, quote.adv)
        qty[reason > 0] = 0
        # T+1: shares bought today cannot be sold today.
        sellable = held - (bought_today if bought_today is not None and rules.t_plus_one else 0)
        sellable = np.maximum(sellable, 0)
        self._cap(reason, qty, sells, sellable, Unfilled.T_PLUS_ONE)
        with np.errstate(invalid="ignore", divide="ignore"):
            adv_shares = np.floor(finite(rules.max_adv_participation * quote.adv / quote.price))
        adv_shares = adv_shares.astype(np.int64)
        self._cap(reason, qty, orders != 0, adv_shares, Unfilled.ADV_CAP)
        qty = self._lots(reason, qty, buys, sells, np.minimum(sellable, adv_shares), sellable)
        # Each side is priced on its own symbols only. Cash sums are integer fen, so they are exact.
        day = m.dates[t]
        buy_tax, sell_tax = rules.tax_rates(day.date())
        sold, bought = np.flatnonzero(sells), np.flatnonzero(buys)
        sale = self._side(quote.take(sold), qty[sold], False, sell_tax)
        available = cash_fen + sale.settled_fen(buy=False)
        buy_quote = quote.take(bought)
        minimum, step = m.lot_minimum[bought], m.lot_step[bought]
        purchase = self._side(buy_quote, qty[bought], True, buy_tax)
        passes = 0
        while (cost := purchase.settled_fen(buy=True)) > available and passes < CASH_PASSES:
            fitting = np.floor(purchase.qty * (available / cost) * 0.999).astype(np.int64)
            shrunk = round_buy(fitting, minimum, step)
            reason[bought[shrunk < purchase.qty]] = Unfilled.CASH
            purchase = self._side(buy_quote, shrunk, True, buy_tax)
            passes += 1
        if purchase.settled_fen(buy=True) > available:
            # Fixed minimum commissions can defeat proportional shrinking: then no buy at all.
            reason[bought[purchase.qty > 0]] = Unfilled.CASH
            purchase = self._side(buy_quote, np.zeros_like(purchase.qty), True, buy_tax)
        qty[sold], qty[bought] = sale.qty, purchase.qty
        return self._fills(
            t,
            day,
            quote,
            orders,
            np.where(buys, qty, -qty),
            reason,
            cash_fen,
            ((sold, sale), (bought, purchase)),
        )

    def trade(
        self, t: int, weights: np.ndarray, held: np.ndarray, nav: float, cash_fen: int
    ) -> Execution:
        """orders_for_weights then execute (no shares bought earlier that day): one rebalance's
        fills."""
        held = np.ascontiguousarray(held, dtype=np.int64)
        if self.kernel is None:
            return self.execute(t, self.orders_for_weights(t, weights, held, nav), held, cash_fen)
        self._check_lengths(weights=weights, held=held)
        orders, *fills = self.kernel["trade_weights"](
            np.ascontiguousarray(weights, dtype=float),
            float(nav),
            np.ascontiguousarray(self._reference(t)),
            held,
            *self._kernel_inputs(t, cash_fen),
        )
        return self._execution(t, orders, cash_fen, fills)

    def _reference(self, t: int) -> np.ndarray:
        """The raw prices orders for session t are sized on.

        That is t-1's last close (t's fill price at t = 0)."""
        return cast(
            np.ndarray, self.market.last_close[t - 1] if t > 0 else self.market.fill_price[t]
        )

    def _check_lengths(self, **arrays: np.ndarray | None) -> None:
        """ValueError unless every array has one entry per symbol.

        The compiled loop does not check its bounds: a short array would be read past its end."""
        count = len(self.market.symbols)
        for name, values in arrays.items():
            if values is not None and np.shape(values) != (count,):
                raise ValueError(
                    f"{name} has shape {np.shape(values)}; the market has {count} symbols"
                )

    def _kernel_inputs(
        self, t: int, cash_fen: int, bought_today: np.ndarray | None = None
    ) -> tuple[Any, ...]:
        """The compiled kernel's arguments after the orders and holdings: session t's rows and the
        rules."""
        m, rules = self.market, self.rules
        buy_tax, sell_tax = rules.tax_rates(m.days[t])
        today = (
            self._no_buys
            if bought_today is None
            else np.ascontiguousarray(bought_today, dtype=np.int64)
        )
        return (
            today,
            bool(rules.t_plus_one),
            int(cash_fen),
            *(values[t] for values in self._kernel_sessions),
            *self._kernel_lots,
            *self._rule_rates,
            float(buy_tax),
            float(sell_tax),
        )

    @cached_property
    def _kernel_sessions(self) -> list[np.ndarray]:
        """The (sessions x symbols) arrays the kernels read, as writable C-ordered arrays.

        Column-major results and read-only broadcasts are copied. Each session is then a
        contiguous row. That is the one argument layout the kernels are compiled for and loaded
        with at import."""
        m = self.market
        return [
            _kernel_layout(values)
            for values in (
                m.fill_price,
                m.adv,
                m.sigma,
                m.limit_up,
                m.limit_down,
                m.tradable,
                m.at_limit_up,
                m.at_limit_down,
            )
        ]

    @cached_property
    def _kernel_lots(self) -> tuple[np.ndarray, np.ndarray]:
        """Each symbol's lot minimum and step, in the kernels' layout."""
        return _kernel_layout(self.market.lot_minimum), _kernel_layout(self.market.lot_step)

    def _execution(self, t: int, orders: np.ndarray, cash_fen: int, fills: list[Any]) -> Execution:
        """The Execution of the compiled kernel's results."""
        filled, realized, value, participation, fees, impact, reason, cash_after = fills
        m = self.market
        return Execution(
            t,
            m.stamps[t],
            orders,
            filled,
            realized,
            m.fill_price[t],
            value,
            fees[0],
            fees[1],
            fees[2],
            impact,
            participation,
            reason,
            int(cash_fen),
            int(cash_after),
        )

    def _blocked(
        self, t: int, active: np.ndarray, buys: np.ndarray, sells: np.ndarray, adv: np.ndarray
    ) -> np.ndarray:
        """Unfilled code of orders that cannot trade at all.

        The first reason in this order wins: suspended, limit-up (buys), limit-down (sells), no
        ADV."""
        m = self.market
        reason = np.where(active & ~(np.isfinite(adv) & (adv > 0)), Unfilled.NO_ADV.value, 0)
        reason = np.where(sells & m.at_limit_down[t], Unfilled.LIMIT_DOWN.value, reason)
        reason = np.where(buys & m.at_limit_up[t], Unfilled.LIMIT_UP.value, reason)
        return np.where(active & ~m.tradable[t], Unfilled.SUSPENDED.value, reason)

    @staticmethod
    def _cap(
        reason: np.ndarray, qty: np.ndarray, side: np.ndarray, cap: np.ndarray, code: Unfilled
    ) -> None:
        hit = side & (qty > cap)
        reason[hit] = code
        qty[hit] = np.maximum(cap[hit], 0)

    def _lots(
        self,
        reason: np.ndarray,
        qty: np.ndarray,
        buys: np.ndarray,
        sells: np.ndarray,
        cap: np.ndarray,
        sellable: np.ndarray,
    ) -> np.ndarray:
        """Legal sizes per board (oomrl.market.lots).

        Buys round down. A sell that would leave less than the minimum takes the whole sellable
        position when the caps allow. Else it leaves >= minimum."""
        m = self.market
        bought = round_buy(qty, m.lot_minimum, m.lot_step)
        sold = round_sell(qty, sellable, m.lot_minimum, m.lot_step)
        too_big = sold > cap
        keep = round_buy(
            np.minimum(qty, np.maximum(sellable - m.lot_minimum, 0)), m.lot_minimum, m.lot_step
        )
        sold = np.where(too_big, keep, sold)
        shaped = np.where(buys, bought, np.where(sells, sold, qty))
        reason[(shaped < qty) & (reason == Unfilled.NONE)] = Unfilled.LOT
        return shaped

    def _prices(
        self, quote: Quote, qty: np.ndarray, buy: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Realized price, traded value (to the fen) and ADV participation of one side's orders."""
        price = quote.price
        participation = np.zeros(len(qty))
        np.divide(qty * price, quote.adv, out=participation, where=qty > 0)
        rate = self.rules.impact_at(quote.scale, participation)
        if buy:
            realized = np.minimum(price * (1 + rate), quote.ceiling)
        else:
            realized = np.maximum(price * (1 - rate), quote.floor)
        value = np.where(qty > 0, cents_array(finite(qty * realized)), 0.0)
        return realized, value, finite(participation)

    def _side(self, quote: Quote, qty: np.ndarray, buy: bool, tax_rate: float) -> Side:
        realized, value, participation = self._prices(quote, qty, buy)
        return Side(qty, realized, value, participation, self.rules.fee_rows(value, tax_rate))

    def _fills(
        self,
        t: int,
        day: pd.Timestamp,
        quote: Quote,
        orders: np.ndarray,
        filled: np.ndarray,
        reason: np.ndarray,
        cash_fen: int,
        sides: tuple[tuple[np.ndarray, Side], ...],
    ) -> Execution:
        """The Execution over all symbols, from the priced sides (positions, Side)."""
        count = len(orders)
        qty = np.abs(filled)
        # A symbol without a fill is quoted as a sell of nothing. That is the price column of an
        # unfilled order.
        realized = np.maximum(
            quote.price * (1 - self.rules.impact_at(quote.scale, np.zeros(count))), quote.floor
        )
        value, participation, fees = np.zeros(count), np.zeros(count), np.zeros((3, count))
        for rows, side in sides:
            traded = side.qty > 0
            realized[rows[traded]] = side.realized[traded]
            value[rows], participation[rows], fees[:, rows] = (
                side.value,
                side.participation,
                side.fees,
            )
        frictionless = quote.price
        impact = np.where(qty > 0, cents_array(finite(qty * np.abs(realized - frictionless))), 0.0)
        execution = Execution(
            t,
            day,
            orders,
            filled,
            realized,
            frictionless,
            value,
            fees[0],
            fees[1],
            fees[2],
            impact,
            participation,
            np.where(qty < np.abs(orders), reason, Unfilled.NONE),
            cash_fen,
            0,
        )
        execution.cash_after_fen = cash_fen + int(execution.cash_delta_fen.sum())
        return execution
