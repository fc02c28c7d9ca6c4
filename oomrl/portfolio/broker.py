"""The paper broker: turns orders into fills under a market's friction and lot rules, vectorised over a day's symbols."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pandas as pd

from oomrl.market.lots import round_buy, round_sell
from oomrl.market.rules import FrictionRules, cents_array
from oomrl.portfolio.market import MarketFrames

# At most this many passes shrink the buys until they fit the cash (each pass is exact; 2 suffice).
CASH_PASSES = 4


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

    @property
    def fees(self) -> np.ndarray:
        """Explicit fees per symbol (commission + stamp duty + transfer fee)."""
        return self.commission + self.stamp_duty + self.transfer_fee

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

    def fill_columns(self, symbols: pd.Index) -> dict[str, np.ndarray]:
        """The fills as column arrays (cheap to collect over many sessions)."""
        rows = np.nonzero(self.filled)[0]
        return {
            "date": np.full(len(rows), self.date), "symbol": symbols[rows].astype(str),
            "side": np.where(self.filled[rows] > 0, "buy", "sell"),
            "quantity": np.abs(self.filled[rows]).astype(np.int64), "price": self.price[rows],
            "frictionless_price": self.frictionless_price[rows], "commission": self.commission[rows],
            "stamp_duty": self.stamp_duty[rows], "transfer_fee": self.transfer_fee[rows],
            "impact_cost": self.impact_cost[rows], "adv_participation": self.adv_participation[rows],
            "cash_delta_fen": _cash_delta_fen(self)[rows],
        }

    def orders_frame(self, symbols: pd.Index) -> pd.DataFrame:
        """One row per order: requested, filled and unfilled shares with the reason."""
        return pd.DataFrame(self.order_columns(symbols))

    def order_columns(self, symbols: pd.Index) -> dict[str, np.ndarray]:
        """The orders as column arrays."""
        rows = np.nonzero(self.requested)[0]
        requested = self.requested[rows]
        return {
            "date": np.full(len(rows), self.date), "symbol": symbols[rows].astype(str),
            "side": np.where(requested > 0, "buy", "sell"),
            "requested": np.abs(requested).astype(np.int64),
            "filled": np.abs(self.filled[rows]).astype(np.int64),
            # A sell may take a little more than asked (a remainder under the minimum goes with it).
            "unfilled": np.maximum(np.abs(requested) - np.abs(self.filled[rows]), 0).astype(np.int64),
            "reason": REASON_NAMES[self.reason[rows]],
        }


def _cash_delta_fen(execution: Execution) -> np.ndarray:
    """Signed cash change per symbol in fen: sells bring value less fees, buys cost value plus fees."""
    value_fen = np.rint(execution.value * 100).astype(np.int64)
    fees_fen = np.rint(execution.fees * 100).astype(np.int64)
    return np.where(execution.filled < 0, value_fen - fees_fen,
                    np.where(execution.filled > 0, -value_fen - fees_fen, 0))


class PaperBroker:
    """Fills orders on one session of a MarketFrames under its market's rules; cash never goes negative."""

    def __init__(self, market: MarketFrames, rules: FrictionRules) -> None:
        self.market = market
        self.rules = rules

    def orders_for_weights(self, t: int, weights: np.ndarray, held: np.ndarray, nav: float
                           ) -> np.ndarray:
        """Signed share orders that move `held` towards target `weights` of `nav`, sized on t-1's raw close."""
        reference = self.market.last_close[t - 1] if t > 0 else self.market.fill_price[t]
        with np.errstate(invalid="ignore", divide="ignore"):
            target = np.where(np.isfinite(reference) & (reference > 0),
                              np.floor(weights * nav / reference), 0.0)
        target = np.where(weights > 0, target, 0.0)
        # Where no price is known the holding is left alone rather than sold blind.
        target = np.where(np.isfinite(reference) | (weights > 0), target, held)
        return (target - held).astype(np.int64)

    def execute(self, t: int, orders: np.ndarray, held: np.ndarray, cash_fen: int,
                bought_today: np.ndarray | None = None) -> Execution:
        """Fill signed share `orders` on session t: sells first, then buys within the cash."""
        m, rules = self.market, self.rules
        orders = np.asarray(orders, dtype=np.int64)
        held = np.asarray(held, dtype=np.int64)
        reason = np.zeros(len(orders), dtype=np.int64)
        price = m.fill_price[t]
        qty = np.abs(orders)
        buys, sells = orders > 0, orders < 0
        self._block(reason, qty, orders != 0, ~m.tradable[t], Unfilled.SUSPENDED)
        self._block(reason, qty, buys, m.at_limit_up[t], Unfilled.LIMIT_UP)
        self._block(reason, qty, sells, m.at_limit_down[t], Unfilled.LIMIT_DOWN)
        adv = m.adv[t]
        self._block(reason, qty, orders != 0, ~(np.isfinite(adv) & (adv > 0)), Unfilled.NO_ADV)
        # T+1: shares bought today cannot be sold today.
        sellable = held - (bought_today if bought_today is not None and rules.t_plus_one else 0)
        sellable = np.maximum(sellable, 0)
        self._cap(reason, qty, sells, sellable, Unfilled.T_PLUS_ONE)
        with np.errstate(invalid="ignore", divide="ignore"):
            adv_shares = np.floor(np.nan_to_num(rules.max_adv_participation * adv / price, nan=0.0))
        adv_shares = adv_shares.astype(np.int64)
        self._cap(reason, qty, orders != 0, adv_shares, Unfilled.ADV_CAP)
        qty = self._lots(reason, qty, buys, sells, np.minimum(sellable, adv_shares), sellable)
        cash_in = self._sell_proceeds_fen(t, qty, sells)
        available = cash_fen + cash_in
        cost = self._buy_cost_fen(t, qty, buys)
        passes = 0
        while cost > available and passes < CASH_PASSES:
            fitting = np.floor(qty * (available / cost) * 0.999).astype(np.int64)
            shrunk = round_buy(fitting, m.lot_minimum, m.lot_step)
            shrunk = np.where(buys, shrunk, qty).astype(np.int64)
            reason[buys & (shrunk < qty)] = Unfilled.CASH
            qty = shrunk
            cost = self._buy_cost_fen(t, qty, buys)
            passes += 1
        if cost > available:
            # Fixed minimum commissions can defeat proportional shrinking: then no buy at all.
            reason[buys & (qty > 0)] = Unfilled.CASH
            qty = np.where(buys, 0, qty)
        return self._fills(t, orders, np.where(buys, qty, -qty), reason, cash_fen)

    @staticmethod
    def _block(reason: np.ndarray, qty: np.ndarray, side: np.ndarray, blocked: np.ndarray,
               code: Unfilled) -> None:
        hit = side & blocked & (qty > 0)
        reason[hit] = code
        qty[hit] = 0

    @staticmethod
    def _cap(reason: np.ndarray, qty: np.ndarray, side: np.ndarray, cap: np.ndarray,
             code: Unfilled) -> None:
        hit = side & (qty > cap)
        reason[hit] = code
        qty[hit] = np.maximum(cap[hit], 0)

    def _lots(self, reason: np.ndarray, qty: np.ndarray, buys: np.ndarray, sells: np.ndarray,
              cap: np.ndarray, sellable: np.ndarray) -> np.ndarray:
        """Legal sizes per board (oomrl.market.lots): buys round down; a sell that would leave less
        than the minimum takes the whole sellable position when the caps allow, else leaves >= minimum."""
        m = self.market
        bought = round_buy(qty, m.lot_minimum, m.lot_step)
        sold = round_sell(qty, sellable, m.lot_minimum, m.lot_step)
        too_big = sold > cap
        keep = round_buy(np.minimum(qty, np.maximum(sellable - m.lot_minimum, 0)), m.lot_minimum, m.lot_step)
        sold = np.where(too_big, keep, sold)
        shaped = np.where(buys, bought, np.where(sells, sold, qty))
        reason[(shaped < qty) & (reason == Unfilled.NONE)] = Unfilled.LOT
        return shaped

    def _prices(self, t: int, qty: np.ndarray, buys: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Realized price, traded value (to the fen) and ADV participation of each order."""
        m = self.market
        price = m.fill_price[t]
        with np.errstate(invalid="ignore", divide="ignore"):
            participation = np.where(qty > 0, qty * price / m.adv[t], 0.0)
        rate = self.rules.impact_rate(m.sigma[t], participation)
        # Impact never pushes a fill through the day's price limit.
        ceiling = np.where(np.isfinite(m.limit_up[t]), np.fmax(m.limit_up[t], price), np.inf)
        floor = np.where(np.isfinite(m.limit_down[t]), np.fmin(m.limit_down[t], price), 0.0)
        realized = np.where(buys, np.minimum(price * (1 + rate), ceiling),
                            np.maximum(price * (1 - rate), floor))
        value = np.where(qty > 0, cents_array(np.nan_to_num(qty * realized)), 0.0)
        return realized, value, np.nan_to_num(participation)

    def _sell_proceeds_fen(self, t: int, qty: np.ndarray, sells: np.ndarray) -> int:
        _, value, _ = self._prices(t, qty, ~sells)
        value = np.where(sells, value, 0.0)
        fees = sum(self.rules.fees(value, True, self.market.dates[t].date()))
        return int(np.rint((value - fees) * 100).sum())

    def _buy_cost_fen(self, t: int, qty: np.ndarray, buys: np.ndarray) -> int:
        _, value, _ = self._prices(t, qty, buys)
        value = np.where(buys, value, 0.0)
        fees = sum(self.rules.fees(value, False, self.market.dates[t].date()))
        return int(np.rint((value + fees) * 100).sum())

    def _fills(self, t: int, orders: np.ndarray, filled: np.ndarray, reason: np.ndarray,
               cash_fen: int) -> Execution:
        qty = np.abs(filled)
        buys = filled > 0
        realized, value, participation = self._prices(t, qty, buys)
        frictionless = self.market.fill_price[t]
        commission, stamp, transfer = self.rules.fees(value, filled < 0, self.market.dates[t].date())
        impact = np.where(qty > 0, cents_array(np.nan_to_num(qty * np.abs(realized - frictionless))),
                          0.0)
        execution = Execution(t, self.market.dates[t], orders, filled, realized, frictionless, value,
                              commission, stamp, transfer, impact, participation,
                              np.where(qty < np.abs(orders), reason, Unfilled.NONE), cash_fen, 0)
        execution.cash_after_fen = cash_fen + int(_cash_delta_fen(execution).sum())
        return execution
