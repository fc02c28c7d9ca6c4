"""The paper broker's fill rules as one compiled loop over a session's symbols (numba), for replays.

`oomrl.portfolio.broker.PaperBroker` keeps the same rules as vectorised numpy. That is what runs
when numba is not installed or `OOMRL_BROKER_KERNEL=0`. Both give the same fills, prices, fees and
cash to the last bit (tests/portfolio/test_broker_kernel.py compares them). Why a loop: a rebalance
touches a few hundred symbols. There ~250 small numpy calls cost far more than the arithmetic they
do.

Exactness: every step below is the numpy broker's expression in the same order of operations.
IEEE +, -, x, /, sqrt and floor are correctly rounded in both. numba does not contract a*b+c into
a fused multiply-add unless asked to. Cash sums are integers.
"""

from __future__ import annotations

import logging
import math
import types
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

# Unfilled codes (oomrl.portfolio.broker.Unfilled), as plain ints for the compiled code.
NONE, SUSPENDED, LIMIT_UP, LIMIT_DOWN, T_PLUS_ONE, LOT, ADV_CAP, NO_ADV, CASH = range(9)
# At most this many passes shrink the buys until they fit the cash. Each pass is exact; 2 suffice.
CASH_PASSES = 4
FLOAT_MAX = float(np.finfo(np.float64).max)
LOG = logging.getLogger(__name__)


def _finite(x: float) -> float:
    """np.nan_to_num of one float: NaN -> 0, +-inf -> +-largest float."""
    if x != x:
        return 0.0
    if x == math.inf:
        return FLOAT_MAX
    if x == -math.inf:
        return -FLOAT_MAX
    return x


def _minimum(a: float, b: float) -> float:
    """np.minimum of two floats (NaN wins)."""
    if a != a or b != b:
        return math.nan
    return a if a <= b else b


def _maximum(a: float, b: float) -> float:
    """np.maximum of two floats (NaN wins)."""
    if a != a or b != b:
        return math.nan
    return a if a >= b else b


def _cents(x: float) -> float:
    """rules.cents_array of one amount."""
    return math.floor(x * 100.0 + 0.5 + 1e-9) / 100.0


def _round_buy(wanted: int, minimum: int, step: int) -> int:
    """lots.round_buy of one quantity."""
    if wanted < minimum:
        return 0
    return minimum + ((wanted - minimum) // step) * step


def _round_sell(wanted: int, sellable: int, minimum: int, step: int) -> int:
    """lots.round_sell of one quantity."""
    sellable = max(sellable, 0)
    wanted = min(max(wanted, 0), sellable)
    rounded = _round_buy(wanted, minimum, step)
    left = sellable - rounded
    if wanted > 0 and (sellable < minimum or (rounded > 0 and left > 0 and left < minimum)):
        return sellable
    return rounded


def _price_one(
    i: int,
    q: int,
    buy: bool,
    price: np.ndarray,
    adv: np.ndarray,
    scale: np.ndarray,
    ceiling: np.ndarray,
    floor: np.ndarray,
    half_spread: float,
    rates: np.ndarray,
    commission_min: float,
    realized: np.ndarray,
    value: np.ndarray,
    participation: np.ndarray,
    fees: np.ndarray,
) -> int:
    """Price, value, participation and fees of `q` shares of symbol i on one side.

    Returns the settled fen, as broker.Side.settled_fen adds it up. That is value plus fees for a
    buy, value less fees for a sell."""
    share = (q * price[i]) / adv[i] if q > 0 else 0.0
    rate = half_spread + scale[i] * math.sqrt(max(_finite(share), 0.0))
    if buy:
        realized[i] = _minimum(price[i] * (1 + rate), ceiling[i])
    else:
        realized[i] = _maximum(price[i] * (1 - rate), floor[i])
    traded = _cents(_finite(q * realized[i])) if q > 0 else 0.0
    value[i] = traded
    participation[i] = _finite(share)
    for row in range(3):
        fee = _cents(traded * rates[row])
        if row == 0:
            fee = max(fee, commission_min)
        fees[row, i] = fee if traded > 0 else 0.0
    total = fees[0, i] + fees[1, i] + fees[2, i]
    return int(np.rint((traded + total if buy else traded - total) * 100))


def fill_session(
    orders: np.ndarray,
    held: np.ndarray,
    bought_today: np.ndarray,
    t_plus_one: bool,
    cash_fen: int,
    price: np.ndarray,
    adv: np.ndarray,
    sigma: np.ndarray,
    up: np.ndarray,
    down: np.ndarray,
    tradable: np.ndarray,
    at_up: np.ndarray,
    at_down: np.ndarray,
    lot_minimum: np.ndarray,
    lot_step: np.ndarray,
    max_adv_participation: float,
    impact_k: float,
    half_spread: float,
    commission_rate: float,
    commission_min: float,
    transfer_fee_rate: float,
    buy_tax: float,
    sell_tax: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """PaperBroker.execute on one session's rows.

    Returns (filled, realized, value, participation, fees (3, n), impact, reason, cash after in
    fen)."""
    n = len(orders)
    qty = np.abs(orders)
    reason = np.zeros(n, dtype=np.int64)
    scale = np.empty(n)
    ceiling = np.empty(n)
    floor = np.empty(n)
    sellable = np.empty(n, dtype=np.int64)
    for i in range(n):
        scale[i] = impact_k * _finite(sigma[i])
        ceiling[i] = max(up[i], price[i]) if price[i] == price[i] else up[i]
        if not math.isfinite(up[i]):
            ceiling[i] = math.inf
        floor[i] = min(down[i], price[i]) if price[i] == price[i] else down[i]
        if not math.isfinite(down[i]):
            floor[i] = 0.0
        o = orders[i]
        # Blocked outright; the last matching reason wins, as in broker._blocked.
        if o != 0:
            if not (math.isfinite(adv[i]) and adv[i] > 0):
                reason[i] = NO_ADV
            if o < 0 and at_down[i]:
                reason[i] = LIMIT_DOWN
            if o > 0 and at_up[i]:
                reason[i] = LIMIT_UP
            if not tradable[i]:
                reason[i] = SUSPENDED
        if reason[i] > 0:
            qty[i] = 0
        sell = held[i] - (bought_today[i] if t_plus_one else 0)
        sellable[i] = max(sell, 0)
        if o < 0 and qty[i] > sellable[i]:
            reason[i] = T_PLUS_ONE
            qty[i] = max(sellable[i], 0)
        adv_shares = int(math.floor(_finite(max_adv_participation * adv[i] / price[i])))
        if o != 0 and qty[i] > adv_shares:
            reason[i] = ADV_CAP
            qty[i] = max(adv_shares, 0)
        wanted = qty[i]
        if o > 0:
            shaped = _round_buy(wanted, lot_minimum[i], lot_step[i])
        elif o < 0:
            shaped = _round_sell(wanted, sellable[i], lot_minimum[i], lot_step[i])
            if shaped > min(sellable[i], adv_shares):
                kept = min(wanted, max(sellable[i] - lot_minimum[i], 0))
                shaped = _round_buy(kept, lot_minimum[i], lot_step[i])
        else:
            shaped = wanted
        if shaped < wanted and reason[i] == NONE:
            reason[i] = LOT
        qty[i] = shaped
    realized = np.empty(n)
    value = np.zeros(n)
    participation = np.zeros(n)
    fees = np.zeros((3, n))
    sell_rates = np.array([commission_rate, sell_tax, transfer_fee_rate])
    buy_rates = np.array([commission_rate, buy_tax, transfer_fee_rate])
    sold_fen = 0
    for i in range(n):
        if orders[i] < 0:
            sold_fen += _price_one(
                i,
                qty[i],
                False,
                price,
                adv,
                scale,
                ceiling,
                floor,
                half_spread,
                sell_rates,
                commission_min,
                realized,
                value,
                participation,
                fees,
            )
    available = cash_fen + sold_fen
    cost = _price_buys(
        qty,
        orders,
        price,
        adv,
        scale,
        ceiling,
        floor,
        half_spread,
        buy_rates,
        commission_min,
        realized,
        value,
        participation,
        fees,
    )
    passes = 0
    while cost > available and passes < CASH_PASSES:
        ratio = available / cost
        for i in range(n):
            if orders[i] > 0:
                fitting = int(math.floor(qty[i] * ratio * 0.999))
                shrunk = _round_buy(fitting, lot_minimum[i], lot_step[i])
                if shrunk < qty[i]:
                    reason[i] = CASH
                qty[i] = shrunk
        cost = _price_buys(
            qty,
            orders,
            price,
            adv,
            scale,
            ceiling,
            floor,
            half_spread,
            buy_rates,
            commission_min,
            realized,
            value,
            participation,
            fees,
        )
        passes += 1
    if cost > available:
        # Fixed minimum commissions can defeat proportional shrinking: then no buy at all.
        for i in range(n):
            if orders[i] > 0:
                if qty[i] > 0:
                    reason[i] = CASH
                qty[i] = 0
        _price_buys(
            qty,
            orders,
            price,
            adv,
            scale,
            ceiling,
            floor,
            half_spread,
            buy_rates,
            commission_min,
            realized,
            value,
            participation,
            fees,
        )
    filled = np.empty(n, dtype=np.int64)
    impact = np.zeros(n)
    delta_fen = 0
    for i in range(n):
        filled[i] = qty[i] if orders[i] > 0 else -qty[i]
        if qty[i] == 0:
            # An unfilled symbol is quoted as a sell of nothing, as in broker._fills.
            realized[i] = _maximum(
                price[i] * (1 - (half_spread + scale[i] * math.sqrt(0.0))), floor[i]
            )
        else:
            impact[i] = _cents(_finite(qty[i] * abs(realized[i] - price[i])))
        if qty[i] >= abs(orders[i]):
            reason[i] = NONE
        paid = fees[0, i] + fees[1, i] + fees[2, i]
        value_fen = int(np.rint(value[i] * 100))
        fees_fen = int(np.rint(paid * 100))
        if filled[i] < 0:
            delta_fen += value_fen - fees_fen
        elif filled[i] > 0:
            delta_fen += -value_fen - fees_fen
    return filled, realized, value, participation, fees, impact, reason, cash_fen + delta_fen


def orders_for_weights(
    weights: np.ndarray, nav: float, reference: np.ndarray, held: np.ndarray
) -> np.ndarray:
    """PaperBroker.orders_for_weights on one session: signed share orders towards `weights` of
    `nav`."""
    orders = np.empty(len(weights), dtype=np.int64)
    for i in range(len(weights)):
        priced = math.isfinite(reference[i])
        target = 0.0
        if priced and reference[i] > 0 and weights[i] > 0:
            target = math.floor(weights[i] * nav / reference[i])
        if not (priced or weights[i] > 0):
            # No price known: the holding is left alone rather than sold blind
            target = float(held[i])
        orders[i] = int(target - held[i])
    return orders


def trade_weights(
    weights: np.ndarray,
    nav: float,
    reference: np.ndarray,
    held: np.ndarray,
    bought_today: np.ndarray,
    t_plus_one: bool,
    cash_fen: int,
    price: np.ndarray,
    adv: np.ndarray,
    sigma: np.ndarray,
    up: np.ndarray,
    down: np.ndarray,
    tradable: np.ndarray,
    at_up: np.ndarray,
    at_down: np.ndarray,
    lot_minimum: np.ndarray,
    lot_step: np.ndarray,
    max_adv_participation: float,
    impact_k: float,
    half_spread: float,
    commission_rate: float,
    commission_min: float,
    transfer_fee_rate: float,
    buy_tax: float,
    sell_tax: float,
) -> tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    int,
]:
    """orders_for_weights then fill_session in one call: (orders, *fill_session's results)."""
    orders = orders_for_weights(weights, nav, reference, held)
    filled, realized, value, participation, fees, impact, reason, cash_after = fill_session(
        orders,
        held,
        bought_today,
        t_plus_one,
        cash_fen,
        price,
        adv,
        sigma,
        up,
        down,
        tradable,
        at_up,
        at_down,
        lot_minimum,
        lot_step,
        max_adv_participation,
        impact_k,
        half_spread,
        commission_rate,
        commission_min,
        transfer_fee_rate,
        buy_tax,
        sell_tax,
    )
    return orders, filled, realized, value, participation, fees, impact, reason, cash_after


def _price_buys(
    qty: np.ndarray,
    orders: np.ndarray,
    price: np.ndarray,
    adv: np.ndarray,
    scale: np.ndarray,
    ceiling: np.ndarray,
    floor: np.ndarray,
    half_spread: float,
    rates: np.ndarray,
    commission_min: float,
    realized: np.ndarray,
    value: np.ndarray,
    participation: np.ndarray,
    fees: np.ndarray,
) -> int:
    """Price every buy at its current quantity; returns what they cost in fen."""
    cost = 0
    for i in range(len(orders)):
        if orders[i] > 0:
            cost += _price_one(
                i,
                qty[i],
                True,
                price,
                adv,
                scale,
                ceiling,
                floor,
                half_spread,
                rates,
                commission_min,
                realized,
                value,
                participation,
                fees,
            )
    return cost


KERNEL_FUNCTIONS = (
    _finite,
    _minimum,
    _maximum,
    _cents,
    _round_buy,
    _round_sell,
    _price_one,
    _price_buys,
    fill_session,
    orders_for_weights,
    trade_weights,
)


def _compile() -> dict[str, Callable[..., Any]] | None:
    """fill_session and trade_weights compiled with numba, or None.

    They are cached on disk where a cache directory is writable. The compiled functions are clones
    of the ones above in their own namespace. So the plain Python `fill_session` stays what it is.
    Tests run it too: numba's machine code reports no coverage.
    """
    from oomrl.settings import runtime_from_environment

    # The environment alone: a jailed host may not read config.toml
    if not runtime_from_environment().broker_kernel:
        return None
    try:
        import numba
    except ImportError:
        return None
    # No writable cache directory (a read-only sandbox), or a damaged cache file? Then the
    # kernels are compiled in this process. When even that fails, the numpy broker runs.
    for cache in (True, False):
        namespace = dict(globals())
        try:
            for function in KERNEL_FUNCTIONS:
                clone = types.FunctionType(function.__code__, namespace, function.__name__)
                # Helpers are inlined: one cached object to load per process instead of nine.
                inline: Literal["never", "always"] = (
                    "never" if function in (fill_session, trade_weights) else "always"
                )
                namespace[function.__name__] = numba.njit(cache=cache, inline=inline)(clone)
            kernels = {name: namespace[name] for name in ("fill_session", "trade_weights")}
            _load(kernels)
        except RuntimeError:  # numba's "cannot cache ...: no locator available"
            continue
        except Exception as exc:  # noqa: BLE001  # e.g. an unreadable cache file: never stop the import
            LOG.warning(
                "the compiled broker kernel could not be loaded%s (%s: %s)",
                " from numba's cache; compiling it in this process"
                if cache
                else "; the numpy broker runs instead",
                type(exc).__name__,
                exc,
            )
            continue
        return kernels
    return None


def _load(kernels: dict[str, Callable[..., Any]]) -> None:
    """Call each kernel once on one symbol, so its machine code is loaded at import.

    The first time on a machine, it is compiled. Either way, that happens when this module is
    imported, not inside the first replay. The
    argument types are the ones PaperBroker passes (C-contiguous rows). So no replay compiles a
    second version."""
    prices, shares, flags = np.ones(1), np.ones(1, dtype=np.int64), np.ones(1, dtype=np.bool_)
    rules = (0.1, 1.0, 0.0005, 0.00025, 5.0, 0.00001, 0.0, 0.0005)
    session = (prices, prices, prices, prices, prices, flags, flags, flags, shares, shares, *rules)
    kernels["fill_session"](shares, shares, shares, True, 0, *session)
    kernels["trade_weights"](prices, 1.0, prices, shares, shares, True, 0, *session)


COMPILED = _compile()
