"""A-share trading rules and fees (DESIGN §5): one pydantic config, exact per-order fee arithmetic."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from enum import Enum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

CENT = Decimal("0.01")


class FillPrice(str, Enum):
    """Which price of the execution day an order fills at (before impact)."""

    OPEN = "open"
    VWAP = "vwap"  # amount / volume when it lies within [low, high], else (high + low + close) / 3
    CLOSE = "close"


class Side(str, Enum):
    """Order direction."""

    BUY = "buy"
    SELL = "sell"


def to_cents(value: Decimal | float) -> Decimal:
    """Round a CNY amount half-up to the fen (0.01), as brokers bill."""
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def cents_array(values: np.ndarray) -> np.ndarray:
    """Vector form of `to_cents` for non-negative amounts (float; exact to the fen for CNY sizes)."""
    # The 1e-9 nudge makes x.xx5 round up despite binary representation, matching Decimal half-up.
    return np.floor(np.asarray(values, dtype=float) * 100.0 + 0.5 + 1e-9) / 100.0


class AShareRules(BaseModel):
    """Friction and market-structure rules of the A-share paper broker; defaults follow DESIGN §5."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commission_rate: float = Field(0.00025, ge=0.0)
    commission_min: float = Field(5.0, ge=0.0)
    stamp_duty_rate: float = Field(0.0005, ge=0.0)  # on sells, from `stamp_duty_change`
    stamp_duty_rate_before: float = Field(0.001, ge=0.0)
    stamp_duty_change: date = date(2023, 8, 28)
    transfer_fee_rate: float = Field(0.00001, ge=0.0)  # both sides
    lot_size: int = Field(100, ge=1)
    impact_k: float = Field(1.0, ge=0.0)  # impact = k * sigma_daily * sqrt(order / ADV)
    half_spread: float = Field(0.0005, ge=0.0)
    max_adv_participation: float = Field(0.10, gt=0.0, le=1.0)
    adv_window: int = Field(20, ge=1)
    sigma_window: int = Field(20, ge=2)
    fill_price: FillPrice = FillPrice.VWAP
    price_limits: bool = True
    t_plus_one: bool = True

    def stamp_rate(self, day: date) -> float:
        """Stamp duty rate on a sell executed on `day`."""
        return self.stamp_duty_rate if day >= self.stamp_duty_change else self.stamp_duty_rate_before

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

    def fees(self, value: float | np.ndarray, sells: bool | np.ndarray, day: date
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vector form of the three fees for many orders: (commission, stamp duty, transfer fee)."""
        value = np.asarray(value, dtype=float)
        sells = np.broadcast_to(np.asarray(sells, dtype=bool), value.shape)
        traded = value > 0
        commission = np.where(traded, np.maximum(cents_array(value * self.commission_rate),
                                                 self.commission_min), 0.0)
        stamp = np.where(sells & traded, cents_array(value * self.stamp_rate(day)), 0.0)
        transfer = np.where(traded, cents_array(value * self.transfer_fee_rate), 0.0)
        return commission, stamp, transfer

    def impact_rate(self, sigma: np.ndarray, participation: np.ndarray) -> np.ndarray:
        """Price concession as a fraction: half-spread plus k * sigma * sqrt(order / ADV)."""
        sigma = np.nan_to_num(np.asarray(sigma, dtype=float), nan=0.0)
        share = np.clip(np.nan_to_num(np.asarray(participation, dtype=float), nan=0.0), 0.0, None)
        return self.half_spread + self.impact_k * sigma * np.sqrt(share)
