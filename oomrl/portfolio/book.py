"""An account's book between sessions, the run's reward and membership settings, quiet sessions.

Quiet sessions (those without trades) are marked here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import numpy as np
import pandas as pd

from oomrl.portfolio.actions import ACTION_COLUMNS, apply_actions
from oomrl.portfolio.killswitch import KillSwitch
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.reward import DEFAULT_GAMMA, DEFAULT_LAMBDA, DEFAULT_TERMINAL_PENALTY, terminal

Columns = dict[str, np.ndarray]


@dataclass
class Book:
    """What an account holds between sessions: shares per symbol, cash in fen, last NAV."""

    held: np.ndarray
    cash_fen: int
    nav: float
    initial: float
    last_rebalance: date | None = None

    @classmethod
    def empty(cls, symbols: int, initial_cash: float) -> Book:
        """A fresh all-cash book."""
        return cls(
            np.zeros(symbols, dtype=np.int64),
            round(initial_cash * 100),
            float(initial_cash),
            float(initial_cash),
        )

    @property
    def cash(self) -> float:
        return self.cash_fen / 100.0


class Membership:
    """Point-in-time index members: the block with the latest effective date <= a day."""

    def __init__(self, frame: pd.DataFrame) -> None:
        effective = pd.to_datetime(frame["effective_date"])
        self.dates = pd.DatetimeIndex(sorted(effective.unique()))
        self.blocks = [frame.loc[effective == d, "symbol"].astype(str).tolist() for d in self.dates]

    @classmethod
    def of(cls, frame: pd.DataFrame | Membership | None) -> Membership | None:
        """Wrap a membership frame (None or empty stays None: every symbol is eligible)."""
        if frame is None or isinstance(frame, Membership):
            return frame
        return cls(frame) if len(frame) else None

    def on(self, day: pd.Timestamp) -> list[str] | None:
        """Members on `day`, or None before the first known effective date."""
        position = int(self.dates.searchsorted(day, side="right")) - 1
        return self.blocks[position] if position >= 0 else None


@dataclass
class Costing:
    """Reward (paper Eq. 1-2), kill-switch and universe settings of a run."""

    lam: float = DEFAULT_LAMBDA
    gamma: float = DEFAULT_GAMMA
    kill: KillSwitch = field(default_factory=KillSwitch)
    version: str = "replay"
    membership: Membership | None = None  # point-in-time index members
    terminal_penalty: float = DEFAULT_TERMINAL_PENALTY


def _read_only(values: np.ndarray) -> np.ndarray:
    values.flags.writeable = False
    return values


NO_ACTIONS: Columns = {name: _read_only(np.array([], dtype=object)) for name in ACTION_COLUMNS}


def no_actions() -> Columns:
    """An empty corporate-action column set (one shared, read-only)."""
    return NO_ACTIONS


def mark_sessions(
    market: MarketFrames, first: int, stop: int, book: Book, costing: Costing
) -> tuple[Columns, Book, Columns]:
    """NAV columns for sessions [first, stop) without trades, the book after them, its actions.

    The actions are corporate actions. Holdings are marked at the raw close. On an ex-date the
    position pays its dividend into cash or changes its share count (oomrl.portfolio.actions). So
    the book follows adjusted returns.
    """
    count = max(stop - first, 0)
    held, cash = book.held, int(book.cash_fen)
    prices = market.mark_price[first:stop]
    events: list[int] = []
    if count and market.has_action[first:stop].any():
        ratio = market.action_ratio[first:stop]
        events = [
            int(e)
            for e in np.flatnonzero(((ratio != 1.0) & (held > 0)[None, :]).any(axis=1))
            if first + e >= 1
        ]
    actions: list[Columns] = []
    if not events:  # the common case: one book over the whole stretch
        market_value = prices @ held.astype(float)
        cash_fen = np.full(count, cash, dtype=np.int64)
    else:
        market_value, cash_fen = np.zeros(count), np.zeros(count, dtype=np.int64)
        begin = 0
        for event in [*events, count]:
            market_value[begin:event] = prices[begin:event] @ held.astype(float)
            cash_fen[begin:event] = cash
            if event == count:
                break
            t = first + int(event)
            done = apply_actions(held, market.action_ratio[t], market.last_close[t - 1])
            actions.append(done.rows(market.dates[t], market.symbols, held))
            held, cash, begin = done.held, cash + int(done.cash_fen.sum()), int(event)
    nav = cash_fen / 100.0 + market_value
    previous = np.empty(count)
    previous[:1], previous[1:] = book.nav, nav[:-1]
    realized = nav / previous - 1.0
    loss = 1.0 - nav / book.initial
    zeros = np.zeros(count)
    columns = {
        "date": market.dates.values[first:stop],
        "nav": nav,
        "cash": cash_fen / 100.0,
        "market_value": market_value,
        "frictionless_return": realized,
        "realized_return": realized,
        "slippage_leakage": zeros,
        "turnover": zeros,
        "costs": zeros,
        "reward": terminal(realized, loss, costing.kill.threshold, costing.terminal_penalty),
        "principal_loss": loss,
        "strategy_version": np.full(count, costing.version, dtype=object),
    }
    after = Book(
        held, cash, float(nav[-1]) if count else book.nav, book.initial, book.last_rebalance
    )
    return columns, after, concat_columns(actions) if actions else no_actions()


def concat_columns(chunks: list[Columns]) -> Columns:
    """Column-wise concatenation of column dicts with the same keys."""
    return {key: np.concatenate([chunk[key] for chunk in chunks]) for key in chunks[0]}
