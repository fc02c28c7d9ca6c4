"""Corporate actions from factor changes: cash dividends and share changes that keep the book on
adjusted returns.

On an ex-date the adjustment factor steps by g = factor[t] / factor[t-1]. The exchange's reference
price is the previous raw close / g. A holder keeps the value of the position at that reference.
- 1 < g < BONUS_RATIO: a cash dividend of previous close x (1 - 1/g) per share (pre-tax).
- Otherwise the share count becomes floor(shares x g). That is a bonus issue or split
  (g >= BONUS_RATIO), or a consolidation (g < 1). The fraction of a share is paid in cash at the
  reference price.
A factor cannot tell a dividend from a bonus issue; the threshold does. A-share cash dividends are
a few percent of the price; bonus issues are 10 % and more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

BONUS_RATIO = 1.10
ACTION_COLUMNS = ["date", "symbol", "kind", "ratio", "shares_delta", "cash_fen"]


@dataclass
class Actions:
    """What one session's corporate actions did to a book.

    Arrays are aligned to the market's symbols."""

    held: np.ndarray  # shares after the actions
    cash_fen: np.ndarray  # cash credited per symbol, fen
    ratio: np.ndarray  # factor ratio per symbol (1 where nothing happened)

    def rows(
        self, day: pd.Timestamp, symbols: pd.Index, before: np.ndarray
    ) -> dict[str, np.ndarray]:
        """One row per position touched, the columns ACTION_COLUMNS."""
        hit = np.flatnonzero((self.ratio != 1.0) & (before > 0))
        dividend = (self.ratio[hit] > 1.0) & (self.ratio[hit] < BONUS_RATIO)
        return {
            "date": np.full(len(hit), pd.Timestamp(day).to_datetime64()),
            "symbol": symbols[hit].astype(str),
            "kind": np.where(dividend, "dividend", "shares"),
            "ratio": self.ratio[hit],
            "shares_delta": (self.held[hit] - before[hit]).astype(np.int64),
            "cash_fen": self.cash_fen[hit].astype(np.int64),
        }


def apply_actions(held: np.ndarray, ratio: np.ndarray, previous_close: np.ndarray) -> Actions:
    """The book after one session's factor steps: new share counts and the cash each position
    pays."""
    held = np.asarray(held, dtype=np.int64)
    ratio = np.where(held > 0, np.asarray(ratio, dtype=float), 1.0)
    price = np.nan_to_num(np.asarray(previous_close, dtype=float), nan=0.0)
    dividend = (ratio > 1.0) & (ratio < BONUS_RATIO)
    change = (ratio != 1.0) & ~dividend
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = held * ratio
        new_held = np.where(change, np.floor(scaled + 1e-9), held).astype(np.int64)
        reference = np.where(ratio > 0, price / ratio, 0.0)
        fraction_value = np.where(change, (scaled - new_held) * reference, 0.0)
        dividend_value = np.where(dividend, held * price * (1.0 - 1.0 / ratio), 0.0)
    cash = np.rint((fraction_value + dividend_value) * 100).astype(np.int64)
    return Actions(new_held, cash, ratio)
