"""Live rebalances: one set of fills per date, daily NAV marks, kill switch, and a SIGKILL
mid-commit."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from oomrl.errors import AccountHaltedError, DataValidationError, OomrlError
from oomrl.market.rules import AShareRules
from oomrl.portfolio.killswitch import AccountStatus
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.rebalance import RebalanceSetup, load_panels, rebalance
from tests.portfolio.factories import random_panels
from tests.portfolio.inprocess import InProcessStrategy

SYMBOLS = ["600000.SH", "600036.SH", "000001.SZ", "300750.SZ", "688981.SH", "601318.SH"]
REPO = Path(__file__).resolve().parents[2]


def setup(name: str = "daily_momentum", **params: float) -> RebalanceSetup:
    return RebalanceSetup(InProcessStrategy.bundled(name), dict(params), "v1", AShareRules())


def sessions(panels: dict[str, pd.DataFrame]) -> list[date]:
    return [d.date() for d in panels["close"].index]


def test_same_rebalance_twice_gives_one_set_of_fills(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    day = sessions(panels)[40]
    ledger.open_account("acc", 1_000_000)
    first = rebalance(ledger, "acc", day, panels, setup(top_k=3, lookback=5))
    again = rebalance(ledger, "acc", day, panels, setup(top_k=3, lookback=5))
    assert first.committed and not first.duplicate and len(first.fills) > 0
    assert again.duplicate and not again.committed
    assert len(ledger.fills_frame("acc")) == len(first.fills) == len(again.fills)
    assert ledger.reconcile("acc") == []


def test_each_rebalance_logs_one_line_of_what_it_booked(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    panels = random_panels(SYMBOLS, days=60)
    ledger.open_account("acc", 1_000_000)
    with caplog.at_level(logging.INFO, logger="oomrl.portfolio.rebalance"):
        done = rebalance(ledger, "acc", sessions(panels)[40], panels, setup(top_k=3))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "oomrl.portfolio.rebalance"]
    assert line.startswith(f"rebalance of acc on {sessions(panels)[40]} with v1 booked: ")
    assert f"{len(done.orders)} orders, {len(done.fills)} fills" in line
    assert f"NAV {done.nav.iloc[-1]['nav']:,.2f}" in line
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="oomrl.portfolio.rebalance"):
        rebalance(ledger, "acc", sessions(panels)[40], panels, setup(top_k=3))
    assert "already booked: this retry writes nothing" in caplog.text


def test_dry_run_writes_nothing(ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    panels = random_panels(SYMBOLS, days=60)
    ledger.open_account("acc", 1_000_000)
    with caplog.at_level(logging.INFO, logger="oomrl.portfolio.rebalance"):
        plan = rebalance(ledger, "acc", sessions(panels)[40], panels, setup(top_k=3), dry_run=True)
    assert " with v1 planned (dry run): " in caplog.text
    assert len(plan.orders) > 0 and not plan.committed and not plan.duplicate
    assert ledger.fills_frame("acc").empty and ledger.account("acc").revision == 0


def test_sessions_between_rebalances_are_marked_daily(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = sessions(panels)
    ledger.open_account("acc", 1_000_000)
    rebalance(ledger, "acc", days[40], panels, setup(top_k=3))
    outcome = rebalance(ledger, "acc", days[45], panels, setup(top_k=3))
    nav = ledger.nav_frame("acc")
    assert [d.date() for d in nav["date"]] == days[40:46]
    quiet = nav.iloc[1:5]
    assert (quiet["turnover"] == 0).all() and (quiet["slippage_leakage"] == 0).all()
    assert outcome.summary()["fills"] == len(outcome.fills)
    with pytest.raises(OomrlError, match="already booked"):
        rebalance(ledger, "acc", days[44], panels, setup(top_k=3))


def test_bad_dates_and_unknown_holdings_are_refused(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    ledger.open_account("acc", 1_000_000)
    with pytest.raises(DataValidationError, match="no market data"):
        rebalance(ledger, "acc", date(2024, 1, 6), panels, setup())  # a Saturday
    with pytest.raises(DataValidationError, match="no session before"):
        rebalance(ledger, "acc", sessions(panels)[0], panels, setup())
    rebalance(ledger, "acc", sessions(panels)[40], panels, setup(top_k=6))
    smaller = {k: v.drop(columns=SYMBOLS[:3]) for k, v in panels.items()}
    with pytest.raises(DataValidationError, match="held symbols"):
        rebalance(ledger, "acc", sessions(panels)[41], smaller, setup(top_k=6))


def test_crash_halts_the_account_and_every_later_rebalance_is_refused(ledger: Ledger) -> None:
    panels = random_panels(SYMBOLS, days=60)
    days = sessions(panels)
    ledger.open_account("acc", 1_000_000)
    rebalance(ledger, "acc", days[40], panels, setup(top_k=6, gross_exposure=1.0))
    for field in ("open", "high", "low", "close"):  # everything held loses 40 % over two sessions
        panels[field].iloc[41:] *= 0.6
    outcome = rebalance(ledger, "acc", days[43], panels, setup(top_k=6))
    assert outcome.halted and outcome.fills.empty  # the loss tripped between rebalances
    state = ledger.account("acc")
    assert state.status is AccountStatus.HALTED and "kill-switch" in state.halt_reason
    with pytest.raises(AccountHaltedError, match="resume"):
        rebalance(ledger, "acc", days[44], panels, setup(top_k=6))
    assert ledger.rebalance_id("acc", days[44]) is None
    ledger.resume("acc", by="tester")
    assert rebalance(ledger, "acc", days[44], panels, setup(top_k=6, lookback=2)).committed


def test_load_panels_reads_every_field_the_store_has() -> None:
    panels = random_panels(SYMBOLS, days=30)

    class Store:
        def read_panel(self, field, start=None, end=None, symbols=None):
            if field not in panels:
                raise KeyError(field)
            return panels[field].loc[start:end]

    loaded = load_panels(Store(), panels["close"].index[-1].date(), history_days=10)
    assert set(loaded) == set(panels) and len(loaded["close"]) <= 8

    class Empty:
        def read_panel(self, field, start=None, end=None, symbols=None):
            return pd.DataFrame()

    with pytest.raises(DataValidationError, match="no close"):
        load_panels(Empty(), date(2024, 1, 5))


CHILD = r"""
import sys, time, pathlib, pickle
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.rebalance import rebalance, RebalanceSetup
from oomrl.market.rules import AShareRules
from tests.portfolio.inprocess import InProcessStrategy
url, panels_path, day, marker, schema = sys.argv[1:6]
ledger = Ledger(url, schema=schema or None)
original = Ledger._insert_fills
def slow_insert(self, conn, rebalance_id, record):
    original(self, conn, rebalance_id, record)
    pathlib.Path(marker).write_text("inside the commit")  # fills written, not committed
    time.sleep(60)
Ledger._insert_fills = slow_insert
panels = pickle.loads(pathlib.Path(panels_path).read_bytes())
setup = RebalanceSetup(
    InProcessStrategy.bundled("daily_momentum"), {"top_k": 3}, "v1", AShareRules()
)
rebalance(ledger, "acc", __import__("datetime").date.fromisoformat(day), panels, setup)
"""


@pytest.mark.slow
def test_sigkill_mid_commit_leaves_a_consistent_ledger_and_rerun_completes_once(
    ledger: Ledger, tmp_path: Path
) -> None:
    import pickle

    panels = random_panels(SYMBOLS, days=60)
    day = sessions(panels)[40]
    ledger.open_account("acc", 1_000_000)
    (tmp_path / "panels.pkl").write_bytes(pickle.dumps(panels))
    marker = tmp_path / "inside"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            ledger.url,
            str(tmp_path / "panels.pkl"),
            day.isoformat(),
            str(marker),
            ledger.metadata.schema or "",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert child.poll() is None, "the child ended before reaching the commit"
        assert time.monotonic() < deadline, "the child never reached the commit"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert ledger.rebalance_id("acc", day) is None
    assert ledger.fills_frame("acc").empty and ledger.reconcile("acc") == []
    assert ledger.account("acc").cash_fen == 100_000_000
    outcome = rebalance(ledger, "acc", day, panels, setup(top_k=3))
    assert outcome.committed and len(ledger.fills_frame("acc")) == len(outcome.fills) > 0
    assert not rebalance(ledger, "acc", day, panels, setup(top_k=3)).committed
    assert ledger.reconcile("acc") == []


def test_advance_books_the_same_nav_as_the_replay_engine(ledger: Ledger) -> None:
    from oomrl.portfolio.rebalance import advance
    from oomrl.portfolio.replay import replay

    panels = random_panels(SYMBOLS, days=80)
    days = sessions(panels)
    ledger.open_account("acc", 1_000_000)
    weekly = setup("weekly_liquidity", lookback=10, skip=1, top_k=3, min_adv=1e6)
    outcomes = advance(ledger, "acc", days[30], days[70], panels, weekly)
    booked = [o.as_of for o in outcomes]
    assert len(booked) == len({(d.isocalendar()[0], d.isocalendar()[1]) for d in booked}) >= 7
    assert advance(ledger, "acc", days[30], days[70], panels, weekly) == []  # nothing left to do
    result = replay(
        weekly.strategy,
        weekly.params,
        panels,
        days[30],
        booked[-1],
        initial_cash=1_000_000,
        version="v1",
    )
    ours = ledger.nav_frame("acc")
    theirs = result.nav[result.nav["date"] >= ours["date"].iloc[0]].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        ours.drop(columns=["reward"]), theirs.drop(columns=["reward"]), check_dtype=False, atol=1e-6
    )
    assert len(ledger.fills_frame("acc")) == len(result.fills)
