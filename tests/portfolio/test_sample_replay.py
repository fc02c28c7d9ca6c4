"""Replays on the bundled real sample: no illegal order in the ledger, and a pinned ledger to the
fen.

The replays run the bundled strategies in their strategy host (the production path).

The pinned ledger (tests/fixtures/ledger/) is the regression fixture of the replay engine: fills and
NAV of weekly_liquidity over the demo window, in integer fen. Regenerate it only for a deliberate
change of the rules: `OOMRL_REGEN_LEDGER=1 .venv/bin/python -m pytest
tests/portfolio/test_sample_replay.py`.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.data.sources.sample import SampleSource
from oomrl.market.boards import Board, board_of
from oomrl.market.rules import AShareRules
from oomrl.portfolio.audit import audit_fills
from oomrl.portfolio.market import MarketFrames, panels_from_bars
from oomrl.portfolio.replay import ReplayResult, replay_setup
from oomrl.portfolio.service import bundled_strategy
from oomrl.portfolio.setup import rebalance_setup
from oomrl.settings import OomrlSettings

START, END = "2024-07-01", "2026-02-27"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger"


@cache
def sample_market() -> tuple[MarketFrames, pd.DataFrame]:
    """The whole bundled sample as one MarketFrames (default A-share rules) and its membership."""
    source = SampleSource()
    bars = pd.concat(
        [
            source.bars(symbol, pd.Timestamp("2023-09-01"), pd.Timestamp(END))
            for symbol in source.symbols()
        ],
        ignore_index=True,
    )
    return MarketFrames.build(panels_from_bars(bars), AShareRules()), source.membership()


@cache
def sample_replay(strategy: str) -> ReplayResult:
    market, membership = sample_market()
    settings = OomrlSettings(
        store={"home": Path("/nonexistent-oomrl-home")}, ledger={"kill_threshold": 1.0}
    )
    # Jailed
    setup = rebalance_setup(bundled_strategy(settings, strategy), "pinned", settings, membership)
    return replay_setup(setup, market, START, END, settings.ledger.initial_cash)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["daily_momentum", "weekly_liquidity"])
def test_a_replay_on_the_sample_places_no_illegal_order(strategy: str) -> None:
    market, membership = sample_market()
    result = sample_replay(strategy)
    assert len(result.fills) > 500
    violations = audit_fills(result.fills, market, AShareRules(), result.actions)
    assert violations.empty, violations.head(10).to_string()
    boards = result.fills["symbol"].map(lambda s: board_of(s))
    assert {Board.MAIN, Board.CHINEXT, Board.STAR} <= set(boards)  # every board was traded
    star = result.fills[boards == Board.STAR]
    assert (star.loc[star["side"] == "buy", "quantity"] >= 200).all()
    # Every fill is of a point-in-time member or of a name held from when it was one (sells).
    days = pd.to_datetime(result.fills["date"])
    from oomrl.portfolio.book import Membership

    pit = Membership.of(membership)
    assert pit is not None
    buys = result.fills[result.fills["side"] == "buy"]
    decided = market.dates[market.dates.get_indexer(pd.to_datetime(buys["date"])) - 1]
    assert all(s in pit.on(d) for s, d in zip(buys["symbol"], decided, strict=True))
    assert days.min() >= pd.Timestamp(START)


@pytest.mark.slow
def test_the_sample_replay_books_dividends_and_reports_raw_price_coverage() -> None:
    result = sample_replay("weekly_liquidity")
    assert (result.actions["kind"] == "dividend").sum() > 10 and (
        result.actions["cash_fen"] > 0
    ).all()
    # The sample knows traded prices for part of the window
    assert 0.3 < result.raw_prices_known < 1.0
    assert result.summary()["raw_prices_known"] == result.raw_prices_known


def ledger_tables(result: ReplayResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fills and NAV in integer fen (the pinned form)."""
    fills = result.fills
    fen = {
        name: np.rint(fills[name].astype(float) * 100).astype(np.int64)
        for name in ("commission", "stamp_duty", "transfer_fee", "impact_cost")
    }
    pinned_fills = pd.DataFrame(
        {
            "date": pd.to_datetime(fills["date"]).dt.strftime("%Y-%m-%d"),
            "symbol": fills["symbol"],
            "side": fills["side"],
            "quantity": fills["quantity"].astype(np.int64),
            "price_fen_x100": np.rint(fills["price"].astype(float) * 10_000).astype(np.int64),
            **fen,
            "cash_delta_fen": fills["cash_delta_fen"].astype(np.int64),
        }
    )
    nav = result.nav
    pinned_nav = pd.DataFrame(
        {
            "date": pd.to_datetime(nav["date"]).dt.strftime("%Y-%m-%d"),
            "nav_fen": np.rint(nav["nav"].astype(float) * 100).astype(np.int64),
            "cash_fen": np.rint(nav["cash"].astype(float) * 100).astype(np.int64),
        }
    )
    return pinned_fills, pinned_nav


def test_the_pinned_ledger_matches_to_the_fen() -> None:
    fills, nav = ledger_tables(sample_replay("weekly_liquidity"))
    if os.environ.get("OOMRL_REGEN_LEDGER") == "1":
        FIXTURE.mkdir(parents=True, exist_ok=True)
        fills.to_csv(FIXTURE / "weekly_liquidity_fills.csv.gz", index=False)
        nav.to_csv(FIXTURE / "weekly_liquidity_nav.csv.gz", index=False)
    pinned_fills = pd.read_csv(FIXTURE / "weekly_liquidity_fills.csv.gz", dtype={"symbol": str})
    pinned_nav = pd.read_csv(FIXTURE / "weekly_liquidity_nav.csv.gz")
    pd.testing.assert_frame_equal(fills.reset_index(drop=True), pinned_fills, check_dtype=False)
    pd.testing.assert_frame_equal(nav.reset_index(drop=True), pinned_nav, check_dtype=False)
