"""Trading rules and fees: the A-share set and what every market shares.

The A-share set has board lots, dated limits and stamp duty."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from typing import cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from oomrl.market import limits, lots
from oomrl.market.boards import Board, board_of

CENT = Decimal("0.01")


class FillPrice(StrEnum):
    """Which price of the execution day an order fills at (before impact)."""

    OPEN = "open"
    VWAP = "vwap"  # amount / volume when it lies within [low, high], else (high + low + close) / 3
    CLOSE = "close"


class Side(StrEnum):
    """Order direction."""

    BUY = "buy"
    SELL = "sell"


def to_cents(value: Decimal | float) -> Decimal:
    """Round a CNY amount half-up to the fen (0.01), as brokers bill."""
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def cents_array(values: np.ndarray) -> np.ndarray:
    """Vector form of `to_cents` for non-negative amounts. Float; exact to the fen for CNY
    sizes."""
    # The 1e-9 nudge makes x.xx5 round up despite binary representation, matching Decimal half-up.
    return np.floor(np.asarray(values, dtype=float) * 100.0 + 0.5 + 1e-9) / 100.0


def finite(values: np.ndarray) -> np.ndarray:
    """np.nan_to_num of a float array, without its cost when every value is finite.

    Then it is `values` itself."""
    values = np.asarray(values, dtype=float)
    return values if np.isfinite(values).all() else np.nan_to_num(values)


class FrictionRules(BaseModel):
    """What every market's rule set has: impact model, ADV cap, fill price, lot and limit hooks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commission_rate: float = Field(0.00025, ge=0.0)
    commission_min: float = Field(5.0, ge=0.0)
    transfer_fee_rate: float = Field(0.00001, ge=0.0)  # both sides
    impact_k: float = Field(1.0, ge=0.0)  # impact = k * sigma_daily * sqrt(order / ADV)
    half_spread: float = Field(0.0005, ge=0.0)
    max_adv_participation: float = Field(0.10, gt=0.0, le=1.0)
    adv_window: int = Field(20, ge=1)
    sigma_window: int = Field(20, ge=2)
    fill_price: FillPrice = FillPrice.VWAP
    price_limits: bool = True
    t_plus_one: bool = True
    tick: float = Field(0.01, gt=0.0)  # raw prices are rounded to it

    def lot_rules(self, symbols: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(minimum, step) in shares per symbol."""
        raise NotImplementedError

    def limit_fractions(
        self,
        symbols: Sequence[str],
        dates: np.ndarray,
        st: np.ndarray,
        listing_session: np.ndarray,
        list_dates: np.ndarray,
    ) -> np.ndarray:
        """(T x N) daily limit fractions, NaN where no limit applies."""
        raise NotImplementedError

    def tax_rates(self, day: date) -> tuple[float, float]:
        """(buy, sell) tax rates on traded value for orders executed on `day`."""
        raise NotImplementedError

    def fees(
        self, value: float | np.ndarray, sells: bool | np.ndarray, day: date
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vector form of the three fees for many orders: (commission, taxes, transfer fee)."""
        value = np.asarray(value, dtype=float)
        sells = np.broadcast_to(np.asarray(sells, dtype=bool), value.shape)
        buy_tax, sell_tax = self.tax_rates(day)
        commission, tax, transfer = self.fee_rows(value, np.where(sells, sell_tax, buy_tax))
        return commission, tax, transfer

    def fee_rows(self, value: np.ndarray, tax_rate: float | np.ndarray) -> np.ndarray:
        """(3, n) commission, tax and transfer fee of orders of traded `value`, taxed at `tax_rate`.

        One rate, or one per order. Each is rounded half-up to the fen; 0 where nothing traded."""
        rates = np.empty((3, *value.shape))
        rates[0], rates[1], rates[2] = self.commission_rate, tax_rate, self.transfer_fee_rate
        fees = cents_array(value * rates)
        fees[0] = np.maximum(fees[0], self.commission_min)
        return np.where(value > 0, fees, 0.0)

    def impact_rate(self, sigma: np.ndarray, participation: np.ndarray) -> np.ndarray:
        """Price concession as a fraction: half-spread plus k * sigma * sqrt(order / ADV)."""
        return self.impact_at(self.impact_scale(sigma), participation)

    def impact_scale(self, sigma: np.ndarray) -> np.ndarray:
        """k * sigma, the part of the impact rate fixed for a session.

        Unknown volatility counts as 0."""
        return self.impact_k * finite(sigma)

    def impact_at(self, scale: np.ndarray, participation: np.ndarray) -> np.ndarray:
        """Impact rate from `impact_scale` and the order's share of ADV."""
        share = np.maximum(finite(participation), 0.0)  # what np.clip(x, 0.0, None) computes
        return cast(np.ndarray, self.half_spread + scale * np.sqrt(share))


BOARD_LOTS: dict[Board, lots.LotRule] = {
    Board.MAIN: lots.ROUND_LOT,
    Board.CHINEXT: lots.ROUND_LOT,
    Board.STAR: lots.STAR_LOT,
    Board.BSE: lots.BSE_LOT,
}


class AShareRules(FrictionRules):
    """Friction and market-structure rules of the A-share paper broker; defaults follow
    docs/architecture.md §5."""

    stamp_duty_rate: float = Field(0.0005, ge=0.0)  # on sells, from `stamp_duty_change`
    stamp_duty_rate_before: float = Field(0.001, ge=0.0)
    stamp_duty_change: date = date(2023, 8, 28)
    # None: the board's own lot rule (oomrl.market.lots); a number forces one round lot everywhere.
    lot_size: int | None = Field(None, ge=1)

    def lot_rules(self, symbols: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(minimum, step) per symbol: 100/100 main and ChiNext, 200/1 STAR, 100/1 BSE."""
        if self.lot_size is not None:
            size = np.full(len(symbols), self.lot_size, dtype=np.int64)
            return size, size.copy()
        rules = [BOARD_LOTS[board_of(symbol)] for symbol in symbols]
        return (
            np.array([r.minimum for r in rules], dtype=np.int64),
            np.array([r.step for r in rules], dtype=np.int64),
        )

    def limit_fractions(
        self,
        symbols: Sequence[str],
        dates: np.ndarray,
        st: np.ndarray,
        listing_session: np.ndarray,
        list_dates: np.ndarray,
    ) -> np.ndarray:
        """Per board, date, ST status and listing age (oomrl.market.limits)."""
        codes = np.array(
            [limits.BOARD_CODE[board_of(symbol)] for symbol in symbols], dtype=np.int64
        )
        days = np.asarray(dates, dtype="datetime64[ns]")
        if days.ndim == 1 and np.ndim(st) == 2:
            days = days[:, None]  # one row per date: the date rules broadcast over the symbols
        return limits.limit_fractions(codes, days, st, listing_session, list_dates)

    def tax_rates(self, day: date) -> tuple[float, float]:
        """No tax on buys; stamp duty on sells at the rate in force on `day`."""
        return 0.0, self.stamp_rate(day)

    def stamp_rate(self, day: date) -> float:
        """Stamp duty rate on a sell executed on `day`."""
        return (
            self.stamp_duty_rate if day >= self.stamp_duty_change else self.stamp_duty_rate_before
        )

    def commission(self, value: Decimal | float) -> Decimal:
        """Commission of one order of traded `value` CNY: rate with a per-order minimum."""
        if Decimal(str(value)) <= 0:
            return Decimal("0.00")
        fee = to_cents(Decimal(str(value)) * Decimal(str(self.commission_rate)))
        return max(fee, to_cents(self.commission_min))

    def stamp_duty(self, value: Decimal | float, side: Side, day: date) -> Decimal:
        """Stamp duty of one order: sells only, at the rate in force on `day`."""
        if side is not Side.SELL:
            return Decimal("0.00")
        return to_cents(Decimal(str(value)) * Decimal(str(self.stamp_rate(day))))

    def transfer_fee(self, value: Decimal | float) -> Decimal:
        """Transfer fee of one order (both sides)."""
        return to_cents(Decimal(str(value)) * Decimal(str(self.transfer_fee_rate)))
