"""An independent check of a ledger's fills against the market's rules: lots, limits, T+1,
suspension.

It takes the fills (and corporate actions) of a run and the MarketFrames it traded on. Every fill
is re-judged from the rules alone. The holdings are replayed fill by fill from an empty book. The
rules follow.
- A buy must be a legal lot of its board. A sell must be a legal size for what was held before it.
- No buy at limit-up, no sell at limit-down.
- No sell of more than was held at the session's open (T+1: shares bought that session cannot go).
- No fill on a suspended session.
Returns one row per violation. An empty frame means a clean ledger.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from oomrl.market.lots import is_legal_buy, is_legal_sell
from oomrl.market.rules import FrictionRules
from oomrl.portfolio.market import MarketFrames

VIOLATION_COLUMNS = ["date", "symbol", "side", "quantity", "rule", "detail"]


def audit_fills(
    fills: pd.DataFrame,
    market: MarketFrames,
    rules: FrictionRules,
    actions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Violations of the market rules in `fills` (columns date, symbol, side, quantity, price)."""
    if not len(fills):
        return pd.DataFrame(columns=VIOLATION_COLUMNS)
    frame = fills.assign(date=pd.to_datetime(fills["date"]))
    rows = market.dates.get_indexer(frame["date"])
    cols = market.symbols.get_indexer(frame["symbol"])
    found: list[dict[str, object]] = []

    def flag(i: int, rule: str, detail: str) -> None:
        record = frame.iloc[i]
        found.append(
            {
                "date": record["date"],
                "symbol": record["symbol"],
                "side": record["side"],
                "quantity": int(record["quantity"]),
                "rule": rule,
                "detail": detail,
            }
        )

    unknown = (rows < 0) | (cols < 0)
    for i in np.flatnonzero(unknown):
        flag(int(i), "no_market_data", "the fill's session or symbol is not in the market")
    held = _holdings(frame, actions)
    for i in np.flatnonzero(~unknown):
        t, j, record = rows[i], cols[i], frame.iloc[i]
        quantity, buy = int(record["quantity"]), record["side"] == "buy"
        if not market.tradable[t, j]:
            flag(int(i), "suspended", "no bar or zero volume that session")
        minimum, step = int(market.lot_minimum[j]), int(market.lot_step[j])
        if buy:
            if not is_legal_buy(quantity, minimum, step):
                flag(int(i), "lot", f"buy of {quantity} is not {minimum} + k x {step} shares")
            if market.at_limit_up[t, j]:
                flag(int(i), "limit_up", f"bought at limit-up {market.limit_up[t, j]:.2f}")
        else:
            before = held[i]
            if quantity > before:  # sells settle before buys: only shares held at the open can go
                flag(
                    int(i),
                    "t_plus_one" if rules.t_plus_one else "oversold",
                    f"sold {quantity} with {before} held at the open",
                )
            elif not is_legal_sell(quantity, before, minimum, step):
                flag(int(i), "lot", f"sell of {quantity} with {before} held is not a legal size")
            if market.at_limit_down[t, j]:
                flag(int(i), "limit_down", f"sold at limit-down {market.limit_down[t, j]:.2f}")
    return pd.DataFrame(found, columns=VIOLATION_COLUMNS)


def _holdings(frame: pd.DataFrame, actions: pd.DataFrame | None) -> np.ndarray:
    """Shares held before each fill, replaying fills in session order with sells before buys.

    Share changes from corporate actions apply at the start of their session.
    """
    events = frame.assign(
        order=np.arange(len(frame)),
        kind=np.where(frame["side"] == "sell", 1, 2),
        delta=np.where(frame["side"] == "buy", frame["quantity"], -frame["quantity"]),
    )
    if actions is not None and len(actions):
        changes = actions[actions["shares_delta"] != 0]
        extra = pd.DataFrame(
            {
                "date": pd.to_datetime(changes["date"]),
                "symbol": changes["symbol"],
                "order": -1,
                "kind": 0,
                "delta": changes["shares_delta"].astype(np.int64),
            }
        )
        events = pd.concat(
            [events[["date", "symbol", "order", "kind", "delta"]], extra], ignore_index=True
        )
    events = events.sort_values(["date", "kind", "order"], kind="mergesort")
    held_before = np.zeros(len(frame), dtype=np.int64)
    position: dict[str, int] = {}
    for event in events[["symbol", "order", "delta"]].itertuples(index=False):
        symbol = str(event.symbol)
        if event.order >= 0:
            held_before[event.order] = position.get(symbol, 0)
        position[symbol] = position.get(symbol, 0) + int(event.delta)
    return held_before
