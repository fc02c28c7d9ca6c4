"""Order-quantity rules (board lots): legal buy and sell sizes as vectorised functions of arrays.

A lot rule is (minimum, step). A buy is 0 or `minimum + k * step` shares. A sell is the same, or
the whole remaining position. That is the exchanges' "odd remainder is sold in one go". Sources:

- Main board and ChiNext: SSE Trading Rules and SZSE Trading Rules (chapter on orders). Buys are
  in 100 shares or whole multiples. "余额不足100股的部分，应当一次性申报卖出": a remainder under 100
  shares is sold in one declaration. ChiNext keeps 100-share lots after its 2020 reform.
- STAR Market: SSE STAR Market Stock Trading Special Provisions (2019). A limit order is at least
  200 shares, above that in 1-share steps. "卖出时，余额不足200股的部分，应当一次性申报卖出".
- Beijing Stock Exchange: BSE Trading Rules (2021). At least 100 shares, then 1-share steps. A
  remainder under 100 shares is sold in one declaration.

Broker policy on top of the exchange rule: never illegal, never leaves a stub. A sell that would
leave fewer than `minimum` shares sells the whole sellable position instead. A wanted quantity
between two legal sizes rounds down. So less is traded, never more than the cash or the order
allows. Per-order maxima (e.g. 100,000 shares for a STAR limit order) are not modelled. A parent
order is split into several declarations, which changes nothing on daily bars.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np


@dataclass(frozen=True)
class LotRule:
    """Smallest order and the increment above it, in shares."""

    minimum: int
    step: int

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.step < 1:
            raise ValueError(f"a lot rule needs minimum >= 1 and step >= 1, got {self}")


ROUND_LOT = LotRule(100, 100)  # main board, ChiNext
STAR_LOT = LotRule(200, 1)
BSE_LOT = LotRule(100, 1)


def _ints(values: np.ndarray | int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def round_buy(
    wanted: np.ndarray | int, minimum: np.ndarray | int, step: np.ndarray | int
) -> np.ndarray:
    """The largest legal buy <= wanted: 0 below the minimum, else minimum + whole steps."""
    wanted, minimum, step = _ints(wanted), _ints(minimum), _ints(step)
    above = np.maximum(wanted - minimum, 0)
    return np.where(wanted >= minimum, minimum + (above // step) * step, 0)


def round_sell(
    wanted: np.ndarray | int,
    sellable: np.ndarray | int,
    minimum: np.ndarray | int,
    step: np.ndarray | int,
) -> np.ndarray:
    """A legal sell for a wanted quantity (capped at what is sellable).

    Below the minimum only the whole position may go. A holding under `minimum` is sold whole when
    any of it is wanted. Otherwise the wanted quantity rounds down to a legal size. When that would
    leave fewer than `minimum` shares, the whole sellable position is sold.
    """
    sellable = np.maximum(_ints(sellable), 0)
    wanted = np.minimum(np.maximum(_ints(wanted), 0), sellable)
    minimum = _ints(minimum)
    rounded = round_buy(wanted, minimum, step)
    left = sellable - rounded
    whole = (wanted > 0) & ((sellable < minimum) | ((rounded > 0) & (left > 0) & (left < minimum)))
    return np.where(whole, sellable, rounded)


def is_legal_buy(
    quantity: np.ndarray | int, minimum: np.ndarray | int, step: np.ndarray | int
) -> np.ndarray:
    """True where a buy of `quantity` shares is a legal declaration."""
    quantity, minimum, step = _ints(quantity), _ints(minimum), _ints(step)
    return cast(np.ndarray, (quantity >= minimum) & ((quantity - minimum) % step == 0))


def is_legal_sell(
    quantity: np.ndarray | int,
    held: np.ndarray | int,
    minimum: np.ndarray | int,
    step: np.ndarray | int,
) -> np.ndarray:
    """True where selling `quantity` of `held` shares is legal under the exchange rule.

    Legal: the whole position, or a legal lot size. On round-lot boards, also lots plus the whole
    odd remainder. Never more than is held.
    """
    quantity, held, minimum, step = _ints(quantity), _ints(held), _ints(minimum), _ints(step)
    lots = is_legal_buy(quantity, minimum, step)
    with_odd = (step > 1) & (quantity > 0) & (quantity % step == held % step)
    return cast(
        np.ndarray, (quantity > 0) & (quantity <= held) & ((quantity == held) | lots | with_odd)
    )
