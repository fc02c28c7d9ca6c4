"""Replay engine: paper-trades a strategy over stored data, looping only over rebalance events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from oomrl.errors import OomrlError
from oomrl.market.rules import AShareRules
from oomrl.portfolio.broker import Execution, PaperBroker
from oomrl.portfolio.killswitch import DEFAULT_THRESHOLD, KillSwitch
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.reward import frictionless_return, principal_loss, step_reward
from strategies.base import MarketView, Strategy, StrategyParams, check_weights

NAV_COLUMNS = ["date", "nav", "cash", "market_value", "frictionless_return", "realized_return",
               "slippage_leakage", "turnover", "costs", "reward", "principal_loss", "strategy_version"]
TRADING_DAYS = 252


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
        return cls(np.zeros(symbols, dtype=np.int64), round(initial_cash * 100), float(initial_cash),
                   float(initial_cash))

    @property
    def cash(self) -> float:
        return self.cash_fen / 100.0


@dataclass
class Costing:
    """Reward and kill-switch settings of a run."""

    lam: float = 0.0015
    gamma: float = 0.0
    kill: KillSwitch = field(default_factory=KillSwitch)
    version: str = "replay"
    view_class: type = MarketView  # a workspace strategy gets the MarketView of its own package
    membership: Membership | None = None  # point-in-time index members


def mark_sessions(market: MarketFrames, first: int, stop: int, book: Book, costing: Costing
                  ) -> dict[str, np.ndarray]:
    """NAV columns for sessions [first, stop) without trades: holdings marked at the close, vectorised."""
    prices = np.nan_to_num(market.last_close[first:stop], nan=0.0)
    market_value = prices @ book.held.astype(float)
    nav = book.cash + market_value
    previous = np.concatenate([[book.nav], nav[:-1]])
    realized = nav / previous - 1.0
    zeros = np.zeros(len(nav))
    return {
        "date": market.dates[first:stop].to_numpy(), "nav": nav, "cash": zeros + book.cash,
        "market_value": market_value, "frictionless_return": realized, "realized_return": realized,
        "slippage_leakage": zeros, "turnover": zeros, "costs": zeros, "reward": realized,
        "principal_loss": 1.0 - nav / book.initial,
        "strategy_version": np.full(len(nav), costing.version, dtype=object),
    }


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


def decide(strategy: Strategy, params: StrategyParams, market: MarketFrames, t: int, book: Book,
           view_class: type = MarketView, membership: Membership | None = None) -> np.ndarray:
    """Target weights for session t from data up to session t-1 (the decision date)."""
    as_of = market.dates[t - 1]
    members = membership.on(as_of) if membership is not None else None
    extra = {} if members is None else {"members": members}
    view = view_class(market.panels, as_of, portfolio_value=book.nav, **extra)
    prices = np.nan_to_num(market.last_close[t - 1], nan=0.0)
    value = book.held * prices
    holdings = {market.symbols[i]: float(value[i] / book.nav) for i in np.nonzero(value)[0]}
    try:
        targets = check_weights(strategy.target_weights(view, holdings, params))
    except ValueError as exc:
        raise OomrlError(f"strategy {strategy.name} returned invalid weights for {as_of.date()}: "
                         f"{exc}") from exc
    positions = market.symbols.get_indexer(list(targets))
    if (positions < 0).any():
        unknown = [s for s, p in zip(targets, positions) if p < 0]
        raise OomrlError(f"strategy {strategy.name} targets symbols without market data: {unknown[:5]}")
    weights = np.zeros(len(market.symbols))
    weights[positions] = list(targets.values())
    return weights


def trade_session(broker: PaperBroker, t: int, weights: np.ndarray, book: Book, costing: Costing
                  ) -> tuple[Execution, dict[str, Any], Book]:
    """Orders, fills and the NAV row of one rebalance session; returns the new book."""
    market = broker.market
    orders = broker.orders_for_weights(t, weights, book.held, book.nav)
    execution = broker.execute(t, orders, book.held, book.cash_fen)
    held = book.held + execution.filled
    cash = execution.cash_after_fen / 100.0
    market_value = float(np.nan_to_num(market.last_close[t], nan=0.0) @ held.astype(float))
    nav = cash + market_value
    realized = nav / book.nav - 1.0
    ideal = frictionless_return(book.held.astype(float), book.cash, book.nav, weights,
                                market.fill_price[t], market.close[t], market.last_close[t - 1])
    turnover = execution.traded_value / book.nav
    costs = execution.total_costs
    row = {
        "date": market.dates[t], "nav": nav, "cash": cash, "market_value": market_value,
        "frictionless_return": ideal, "realized_return": realized,
        "slippage_leakage": ideal - realized, "turnover": turnover, "costs": costs,
        "reward": step_reward(realized + costs / book.nav, turnover, costing.lam, costing.gamma),
        "principal_loss": principal_loss(nav, book.initial), "strategy_version": costing.version,
    }
    new_book = Book(held, execution.cash_after_fen, nav, book.initial, market.dates[t].date())
    return execution, row, new_book


@dataclass
class ReplayResult:
    """A replay's daily NAV (nav_frame columns), fills, orders and where the kill switch tripped."""

    strategy: str
    nav: pd.DataFrame
    fills: pd.DataFrame
    orders: pd.DataFrame
    initial_cash: float
    halted_on: date | None = None

    def summary(self) -> dict[str, Any]:
        """Turnover, costs, slippage leakage and net return of the run (fractions, CNY for costs)."""
        nav = self.nav
        days = len(nav)
        final = float(nav["nav"].iloc[-1]) if days else self.initial_cash
        turnover = float(nav["turnover"].sum())
        return {
            "strategy": self.strategy, "start": nav["date"].iloc[0].date() if days else None,
            "end": nav["date"].iloc[-1].date() if days else None, "trading_days": days,
            "rebalances": int((nav["turnover"] > 0).sum()),
            "turnover": turnover,
            "turnover_annualized": turnover / days * TRADING_DAYS if days else 0.0,
            "total_costs": float(nav["costs"].sum()),
            "costs_fraction": float(nav["costs"].sum()) / self.initial_cash,
            "slippage_leakage": float(nav["slippage_leakage"].sum()),
            "frictionless_return": float((1 + nav["frictionless_return"]).prod() - 1),
            "net_return": final / self.initial_cash - 1.0,
            "halted_on": self.halted_on,
        }


Columns = dict[str, np.ndarray]
Step = tuple[Columns | None, dict[str, Any] | None, Execution | None, Book]


def run_sessions(strategy: Strategy, params: StrategyParams, market: MarketFrames, broker: PaperBroker,
                 first: int, last: int, book: Book, costing: Costing) -> Iterator[Step]:
    """Walk sessions first..last: yields (quiet NAV rows, trade row, execution, book after).

    Quiet sessions between rebalances are marked in one vectorised chunk; the kill switch is
    checked on every session and ends the walk on the session it trips.
    """
    if first < 1:
        raise OomrlError("a replay needs one session of history before its first trading day")
    marked_from = first
    days = [stamp.date() for stamp in market.dates[first: last + 1]]
    for t in range(first, last + 1):
        due = strategy.rebalance_due(days[t - first], book.last_rebalance)
        if not due and t != last:
            continue
        stop = t if due else t + 1
        quiet = mark_sessions(market, marked_from, stop, book, costing) if stop > marked_from else None
        if quiet is not None:
            tripped = _first_trip(quiet, costing.kill)
            if tripped is not None:
                yield {k: v[: tripped + 1] for k, v in quiet.items()}, None, None, book
                return
            book = Book(book.held, book.cash_fen, float(quiet["nav"][-1]), book.initial,
                        book.last_rebalance)
            if not due:
                yield quiet, None, None, book
                return
        weights = decide(strategy, params, market, t, book, costing.view_class, costing.membership)
        execution, row, book = trade_session(broker, t, weights, book, costing)
        yield quiet, row, execution, book
        if costing.kill.trips(row["principal_loss"]):
            return
        marked_from = t + 1


def _first_trip(rows: Columns, kill: KillSwitch) -> int | None:
    hits = np.nonzero(np.asarray(rows["principal_loss"], dtype=float) >= kill.threshold)[0]
    return int(hits[0]) if len(hits) else None


def session_range(market: MarketFrames, start: date | str, end: date | str) -> tuple[int, int]:
    """First and last session index within [start, end]; the first keeps one session of history."""
    first = int(market.dates.searchsorted(pd.Timestamp(start)))
    last = int(market.dates.searchsorted(pd.Timestamp(end), side="right")) - 1
    first = max(first, 1)
    if last < first:
        raise OomrlError(f"no sessions to replay between {start} and {end} (data covers "
                         f"{market.dates[0].date()}..{market.dates[-1].date()})")
    return first, last


def replay(strategy: Strategy, params: StrategyParams | Mapping[str, Any] | None,
           bars_panel: Mapping[str, pd.DataFrame] | MarketFrames, start: date | str, end: date | str,
           rules: AShareRules | None = None, initial_cash: float = 10_000_000.0,
           lam: float = 0.0015, gamma: float = 0.0, kill_threshold: float = DEFAULT_THRESHOLD,
           st_symbols: Iterable[str] = (), version: str = "replay",
           view_class: type = MarketView, membership: pd.DataFrame | None = None) -> ReplayResult:
    """Paper-trade `strategy` from `start` to `end` on date x symbol panels with the paper broker."""
    rules = rules or AShareRules()
    if not isinstance(params, BaseModel):  # a workspace's Params is its own StrategyParams class
        params = strategy.Params(**(params or {}))
    market = bars_panel if isinstance(bars_panel, MarketFrames) else \
        MarketFrames.build(bars_panel, rules, st_symbols)
    broker = PaperBroker(market, rules)
    first, last = session_range(market, start, end)
    costing = Costing(lam, gamma, KillSwitch(kill_threshold), version, view_class,
                      Membership.of(membership))
    quiet_chunks: list[Columns] = []
    rows: list[dict[str, Any]] = []
    fills: list[dict[str, np.ndarray]] = []
    orders: list[dict[str, np.ndarray]] = []
    start_book = Book.empty(len(market.symbols), initial_cash)
    for quiet, row, execution, _ in run_sessions(strategy, params, market, broker, first, last,
                                                 start_book, costing):
        if quiet is not None:
            quiet_chunks.append(quiet)
        if row is not None and execution is not None:
            rows.append(row)
            fills.append(execution.fill_columns(market.symbols))
            orders.append(execution.order_columns(market.symbols))
    parts = [_columns_frame(quiet_chunks, "date"), pd.DataFrame(rows, columns=NAV_COLUMNS)]
    nav = pd.concat([p for p in parts if len(p)], ignore_index=True)
    nav = nav[NAV_COLUMNS].sort_values("date", kind="mergesort").reset_index(drop=True)
    halted = nav["principal_loss"].iloc[-1] >= kill_threshold
    return ReplayResult(strategy.name, nav, _columns_frame(fills), _columns_frame(orders),
                        initial_cash, nav["date"].iloc[-1].date() if halted else None)


def _columns_frame(chunks: list[Columns], key: str = "symbol") -> pd.DataFrame:
    """One frame from many column dicts (one per session), concatenated column by column."""
    chunks = [c for c in chunks if len(c[key])]
    if not chunks:
        return pd.DataFrame(columns=NAV_COLUMNS) if key == "date" else pd.DataFrame()
    return pd.DataFrame({k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]})
