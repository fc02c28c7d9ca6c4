"""Replay engine: paper-trades a strategy over stored data, looping only over rebalance events."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, cast

import numpy as np
import pandas as pd

from oomrl.errors import OomrlError
from oomrl.market.rules import FrictionRules
from oomrl.portfolio.actions import ACTION_COLUMNS, apply_actions
from oomrl.portfolio.book import (
    Book,
    Columns,
    Costing,
    Membership,
    concat_columns,
    mark_sessions,
    no_actions,
)
from oomrl.portfolio.broker import Execution, PaperBroker, session_tables
from oomrl.portfolio.hosting import StrategyRunner, StrategySource
from oomrl.portfolio.killswitch import DEFAULT_THRESHOLD, KillSwitch
from oomrl.portfolio.ledger_tables import NAV_COLUMNS
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.reward import (
    DEFAULT_GAMMA,
    DEFAULT_LAMBDA,
    DEFAULT_TERMINAL_PENALTY,
    frictionless_return,
    principal_loss,
    step_reward,
)
from oomrl.portfolio.setup import RebalanceSetup

TRADING_DAYS = 252
__all__ = [
    "NAV_COLUMNS",
    "Book",
    "Costing",
    "Membership",
    "ReplayResult",
    "decide",
    "mark_sessions",
    "replay",
    "run_sessions",
    "session_range",
    "trade_session",
]


def decide(
    runner: StrategyRunner,
    market: MarketFrames,
    t: int,
    book: Book,
    membership: Membership | None = None,
) -> np.ndarray:
    """Target weights for session t from data up to session t-1 (the decision date)."""
    return ask(runner, market, t, book, membership)()


def ask(
    runner: StrategyRunner,
    market: MarketFrames,
    t: int,
    book: Book,
    membership: Membership | None = None,
    question: Any = None,
) -> Callable[[], np.ndarray]:
    """`decide`'s question asked now, its answer taken by calling what this returns.

    A runner that can (a strategy host) decides while the caller works. Any other answers when
    called. `question`: the same decision already asked of the host (`ask_early`). This sends its
    book.
    """
    value = book.held * market.mark_price[t - 1]
    held = np.flatnonzero(value)
    if question is not None:
        return cast(
            "Callable[[], np.ndarray]", question.book(held, value[held] / book.nav, book.nav)
        )
    members = membership.on(market.stamps[t - 1]) if membership is not None else None
    asking = getattr(runner, "ask", None)
    if asking is not None:
        return cast(
            "Callable[[], np.ndarray]", asking(t, held, value[held] / book.nav, book.nav, members)
        )
    return lambda: runner.weights(t, held, value[held] / book.nav, book.nav, members)


def ask_early(
    runner: StrategyRunner,
    market: MarketFrames,
    after: int,
    last: int,
    traded_on: date,
    membership: Membership | None,
) -> Any:
    """The next decision asked of a strategy host before its starting book is known, or None.

    Right after the weights of session `after` come back, the schedule in hand names the next
    rebalance. Its question (the rows up to the day before, the members) goes at once. So the host
    decides while this side trades `after` and marks up to it. Only the past is sent: the rows end
    on the next decision's own date. None when the runner cannot, or the schedule does not say.
    """
    next_due = getattr(runner, "next_due", None)
    if next_due is None:
        return None
    t = next_due(after + 1, traded_on)
    if t is None or t > last:
        return None
    members = membership.on(market.stamps[t - 1]) if membership is not None else None
    return runner.question(t, members)  # type: ignore[attr-defined]


def trade_session(
    broker: PaperBroker, t: int, weights: np.ndarray, book: Book, costing: Costing
) -> tuple[Execution, dict[str, Any], Book, Columns]:
    """Corporate actions at the open, then orders, fills and the NAV row of one rebalance session.

    Returns the execution, the NAV row, the new book and the session's corporate actions.
    """
    traded = trade(broker, t, weights, book)
    return traded.execution, traded.row(costing), traded.after, traded.actions


@dataclass(frozen=True)
class Traded:
    """One rebalance session traded: the fills, the book after them, and what its NAV row needs."""

    market: MarketFrames
    t: int
    weights: np.ndarray
    before: Book  # after the session's corporate actions, before its trades
    execution: Execution
    after: Book
    market_value: float
    actions: Columns

    def row(self, costing: Costing) -> dict[str, Any]:
        """The session's NAV row (NAV_COLUMNS but the strategy version's place)."""
        market, t, book, execution = self.market, self.t, self.before, self.execution
        nav = self.after.nav
        realized = nav / book.nav - 1.0
        ideal = frictionless_return(
            book.held.astype(float),
            book.cash,
            book.nav,
            self.weights,
            market.fill_price[t],
            market.close[t],
            market.last_close[t - 1],
        )
        turnover = execution.traded_value / book.nav
        costs = execution.total_costs
        loss = principal_loss(nav, book.initial)
        reward = step_reward(realized + costs / book.nav, turnover, costing.lam, costing.gamma)
        return {
            "date": market.stamps[t],
            "nav": nav,
            "cash": self.after.cash,
            "market_value": self.market_value,
            "frictionless_return": ideal,
            "realized_return": realized,
            "slippage_leakage": ideal - realized,
            "turnover": turnover,
            "costs": costs,
            "reward": reward - (costing.terminal_penalty if costing.kill.trips(loss) else 0.0),
            "principal_loss": loss,
            "strategy_version": costing.version,
        }


def trade(broker: PaperBroker, t: int, weights: np.ndarray, book: Book) -> Traded:
    """Corporate actions at the open, then the orders and fills of rebalance session t.

    Returns the book after them. Its NAV row is built from the result, which can wait."""
    market = broker.market
    if market.has_action[t]:
        done = apply_actions(book.held, market.action_ratio[t], market.last_close[t - 1])
        actions = done.rows(market.stamps[t], market.symbols, book.held)
        book = Book(
            done.held,
            book.cash_fen + int(done.cash_fen.sum()),
            book.nav,
            book.initial,
            book.last_rebalance,
        )
    else:
        actions = market.no_action_rows
    execution = broker.trade(t, weights, book.held, book.nav, book.cash_fen)
    held = book.held + execution.filled
    market_value = float(market.mark_price[t] @ held.astype(float))
    nav = execution.cash_after_fen / 100.0 + market_value
    after = Book(held, execution.cash_after_fen, nav, book.initial, market.days[t])
    return Traded(market, t, weights, book, execution, after, market_value, actions)


@dataclass
class ReplayResult:
    """A replay's daily NAV (nav_frame columns), fills, orders, corporate actions and where it
    halted."""

    strategy: str
    nav: pd.DataFrame
    fills: pd.DataFrame
    orders: pd.DataFrame
    initial_cash: float
    halted_on: date | None = None
    actions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ACTION_COLUMNS))
    raw_prices_known: float = 1.0  # share of fills priced from a known adjustment factor.
    # Largest position / NAV at the close of each rebalance session
    max_weight: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    # Where the strategy's code ran (docs/gate.md). "none (...)" only when unsafe.
    jail: str = "bwrap"

    def summary(self) -> dict[str, Any]:
        """Turnover, costs, slippage leakage and net return of the run (fractions, CNY for
        costs)."""
        nav = self.nav
        days = len(nav)
        final = float(nav["nav"].iloc[-1]) if days else self.initial_cash
        turnover = float(nav["turnover"].sum())
        return {
            "strategy": self.strategy,
            "start": nav["date"].iloc[0].date() if days else None,
            "end": nav["date"].iloc[-1].date() if days else None,
            "trading_days": days,
            "rebalances": int((nav["turnover"] > 0).sum()),
            "turnover": turnover,
            "turnover_annualized": turnover / days * TRADING_DAYS if days else 0.0,
            "total_costs": float(nav["costs"].sum()),
            "costs_fraction": float(nav["costs"].sum()) / self.initial_cash,
            "slippage_leakage": float(nav["slippage_leakage"].sum()),
            "frictionless_return": float((1 + nav["frictionless_return"]).prod() - 1),
            "net_return": final / self.initial_cash - 1.0,
            "halted_on": self.halted_on,
            "dividends": float(self.actions["cash_fen"].sum()) / 100 if len(self.actions) else 0.0,
            "raw_prices_known": self.raw_prices_known,
            "jail": self.jail,
        }


Step = tuple[Columns | None, dict[str, Any] | None, Execution | None, Book, Columns]


def run_sessions(
    runner: StrategyRunner,
    market: MarketFrames,
    broker: PaperBroker,
    first: int,
    last: int,
    book: Book,
    costing: Costing,
) -> Iterator[Step]:
    """Walk sessions first..last. Yields (quiet NAV rows, trade row, execution, book after,
    actions).

    Quiet sessions between rebalances are marked in one vectorised chunk. The kill switch is
    checked on every session. It ends the walk on the session it trips. A rebalance's step is
    finished and yielded once the next decision is asked. So its NAV row and the caller's work on
    it are done while a strategy host decides.
    """
    if first < 1:
        raise OomrlError("a replay needs one session of history before its first trading day")
    marked_from = first
    # The last rebalance, not yet yielded
    pending: tuple[Columns | None, Traded, Columns] | None = None
    early: Any = None  # the next rebalance's question, asked before its book is known (ask_early)

    def finished() -> Step:
        assert pending is not None
        quiet, traded, actions = pending
        return quiet, traded.row(costing), traded.execution, traded.after, actions

    try:
        for t in range(first, last + 1):
            due = runner.due(t, book.last_rebalance)
            if not due and t != last:
                continue
            stop = t if due else t + 1
            quiet, actions = None, no_actions()
            if stop > marked_from:
                quiet, after, actions = mark_sessions(market, marked_from, stop, book, costing)
                tripped = _first_trip(quiet, costing.kill)
                if tripped is not None:
                    if pending is not None:
                        yield finished()
                    cut = quiet["date"][tripped]
                    kept = (
                        {k: v[actions["date"] <= cut] for k, v in actions.items()}
                        if len(actions["date"])
                        else actions
                    )
                    yield {k: v[: tripped + 1] for k, v in quiet.items()}, None, None, book, kept
                    return
                book = after
                if not due:
                    if pending is not None:
                        yield finished()
                    yield quiet, None, None, book, actions
                    return
            question, early = (early, None) if early is not None and early.t == t else (None, early)
            answer = ask(runner, market, t, book, costing.membership, question)
            if pending is not None:
                yield finished()
            reply = getattr(answer, "reply", None)
            # A host's answer in hand, with the schedule: the next question goes
            if reply is not None:
                reply()  # out before these weights are checked (it fails alike after)
            early = ask_early(runner, market, t, last, market.days[t], costing.membership)
            weights = answer()
            traded = trade(broker, t, weights, book)
            book = traded.after
            # (a replay keeps only non-empty action sets)
            quiet_traded = (
                actions
                if not len(actions["symbol"]) and not len(traded.actions["symbol"])
                else concat_columns([actions, traded.actions])
            )
            pending = (quiet, traded, quiet_traded)
            if costing.kill.trips(principal_loss(book.nav, book.initial)):
                break
            marked_from = t + 1
        if pending is not None:
            yield finished()
    finally:
        # The replay ended before that rebalance: its question is answered and forgotten
        if early is not None:
            if sys.exc_info()[0] is None:
                early.drop()
            else:  # already failing (or closed by its consumer): that error is the one to see
                with contextlib.suppress(OomrlError):
                    early.drop()


def _first_trip(rows: Columns, kill: KillSwitch) -> int | None:
    hits = np.nonzero(np.asarray(rows["principal_loss"], dtype=float) >= kill.threshold)[0]
    return int(hits[0]) if len(hits) else None


def session_range(market: MarketFrames, start: date | str, end: date | str) -> tuple[int, int]:
    """First and last session index within [start, end]; the first keeps one session of history."""
    first = int(market.dates.searchsorted(pd.Timestamp(start)))
    last = int(market.dates.searchsorted(pd.Timestamp(end), side="right")) - 1
    first = max(first, 1)
    if last < first:
        raise OomrlError(
            f"no sessions to replay between {start} and {end} (data covers "
            f"{market.dates[0].date()}..{market.dates[-1].date()})"
        )
    return first, last


def replay(
    strategy: StrategySource,
    params: Mapping[str, Any] | None,
    bars_panel: Mapping[str, pd.DataFrame] | MarketFrames,
    start: date | str,
    end: date | str,
    rules: FrictionRules | None = None,
    initial_cash: float = 10_000_000.0,
    lam: float = DEFAULT_LAMBDA,
    gamma: float = DEFAULT_GAMMA,
    kill_threshold: float = DEFAULT_THRESHOLD,
    st_symbols: Iterable[str] = (),
    version: str = "replay",
    membership: pd.DataFrame | None = None,
    terminal_penalty: float = DEFAULT_TERMINAL_PENALTY,
    runner: StrategyRunner | None = None,
) -> ReplayResult:
    """Paper-trade `strategy` from `start` to `end` on date x symbol panels with the paper broker.

    `runner` is `strategy` already open on the same MarketFrames; its caller closes it. Without
    one, the strategy's host is started for this replay and stopped after it.
    """
    from oomrl.market.rules import AShareRules

    rules = rules or AShareRules()
    market = (
        bars_panel
        if isinstance(bars_panel, MarketFrames)
        else MarketFrames.build(bars_panel, rules, st_symbols)
    )
    first, last = session_range(market, start, end)
    own = runner is None
    runner = strategy.open(params, market) if runner is None else runner
    try:
        return _replay(
            runner,
            market,
            rules,
            first,
            last,
            initial_cash,
            Costing(
                lam,
                gamma,
                KillSwitch(kill_threshold),
                version,
                Membership.of(membership),
                terminal_penalty,
            ),
        )
    finally:
        if own:
            runner.close()


def _replay(
    runner: StrategyRunner,
    market: MarketFrames,
    rules: FrictionRules,
    first: int,
    last: int,
    initial_cash: float,
    costing: Costing,
) -> ReplayResult:
    broker = PaperBroker(market, rules)
    quiet_chunks: list[Columns] = []
    rows: list[dict[str, Any]] = []
    executions: list[Execution] = []
    actions: list[Columns] = []
    start_book = Book.empty(len(market.symbols), initial_cash)
    heaviest: dict[pd.Timestamp, float] = {}
    for quiet, row, execution, book, done in run_sessions(
        runner, market, broker, first, last, start_book, costing
    ):
        if quiet is not None:
            quiet_chunks.append(quiet)
        actions.append(done)
        if row is not None and execution is not None:
            rows.append(row)
            value = book.held * market.mark_price[execution.t]
            heaviest[row["date"]] = (
                float(value.max() / row["nav"]) if len(value) and row["nav"] > 0 else 0.0
            )
            executions.append(execution)
    nav = _nav_frame(quiet_chunks, rows)
    halted = nav["principal_loss"].iloc[-1] >= costing.kill.threshold
    fills, orders = session_tables(executions, market.dates.values, market.symbol_names)
    fill_frame = pd.DataFrame(fills)
    return ReplayResult(
        runner.name,
        nav,
        fill_frame,
        pd.DataFrame(orders),
        initial_cash,
        nav["date"].iloc[-1].date() if halted else None,
        pd.DataFrame(_columns_frame(actions), columns=ACTION_COLUMNS),
        raw_known_share(market, fill_frame),
        pd.Series(heaviest, dtype=float),
        runner.jail,
    )


def _nav_frame(quiet: list[Columns], rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The NAV frame (NAV_COLUMNS, one row per session in date order).

    Built from the quiet stretches' columns and the rebalance sessions' rows."""
    traded: Columns = {
        "date": np.array([row["date"] for row in rows], dtype="datetime64[ns]"),
        "strategy_version": np.array([row["strategy_version"] for row in rows], dtype=object),
    }
    traded.update(
        {k: np.array([row[k] for row in rows], dtype=float) for k in NAV_COLUMNS if k not in traded}
    )
    columns = concat_columns([*(chunk for chunk in quiet if len(chunk["date"])), traded])
    # Stable: what sorting the frame by date gives
    order = np.argsort(columns["date"], kind="mergesort")
    return pd.DataFrame({k: columns[k][order] for k in NAV_COLUMNS})


def raw_known_share(market: MarketFrames, fills: pd.DataFrame) -> float:
    """Share of fills whose raw price came from a known adjustment factor.

    1.0 when there are none."""
    if not len(fills):
        return 1.0
    rows = market.dates.get_indexer(pd.DatetimeIndex(fills["date"]))
    cols = market.symbols.get_indexer(fills["symbol"])
    return float(market.factor_known[rows, cols].mean())


def _columns_frame(chunks: list[Columns]) -> pd.DataFrame:
    """One frame from many column dicts (one per session), concatenated column by column."""
    chunks = [c for c in chunks if len(c["symbol"])]
    return pd.DataFrame(concat_columns(chunks)) if chunks else pd.DataFrame()


def replay_setup(
    setup: RebalanceSetup,
    panels: Mapping[str, pd.DataFrame] | MarketFrames,
    start: date | str,
    end: date | str,
    initial_cash: float,
    runner: StrategyRunner | None = None,
) -> ReplayResult:
    """Replay with a RebalanceSetup (the factory's output): the one way service, demo and
    cross-validation replay."""
    return replay(
        setup.strategy,
        setup.params,
        panels,
        start,
        end,
        setup.rules,
        initial_cash,
        setup.lam,
        setup.gamma,
        setup.kill_threshold,
        version=setup.version,
        membership=setup.membership,
        terminal_penalty=setup.terminal_penalty,
        runner=runner,
    )
