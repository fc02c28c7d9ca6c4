"""The rebalance and replay flows on a real Prefect test server: once-only commits, artifacts, halt
event."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.data.schema import BAR_COLUMNS
from oomrl.data.store import MarketStore
from oomrl.market import calendar
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.versions import StrategyVersions
from tests.flows.prefect_helpers import account_events, artifact_keys, read_artifact

pytestmark = pytest.mark.usefixtures("prefect_harness")

SYMBOLS = ["600000.SH", "600036.SH", "000001.SZ", "601318.SH", "600519.SH", "000002.SZ"]


def seed_store(home: Path, crash_from: str | None = None) -> list[date]:
    """Random-walk bars on XSHG sessions written through the real MarketStore (validated)."""
    days = calendar.sessions("2024-01-02", "2024-04-30")
    rng = np.random.default_rng(7)
    returns = rng.normal(0.0005, 0.015, (len(days), len(SYMBOLS)))
    if crash_from:  # -8 % a session for six sessions: inside the daily limit, -39 % in all
        crash = np.nonzero(days >= pd.Timestamp(crash_from))[0][:6]
        returns[crash] = np.log(0.92)
    close = 20 * np.exp(np.cumsum(returns, 0))
    rows = []
    for t, day in enumerate(days):
        for i, symbol in enumerate(SYMBOLS):
            c = round(float(close[t, i]), 2)
            prev = round(float(close[t - 1, i]), 2) if t else np.nan
            rows.append(
                {
                    "date": day,
                    "symbol": symbol,
                    "open": c,
                    "high": round(c * 1.01, 2),
                    "low": round(c * 0.99, 2),
                    "close": c,
                    "volume": 5e6,
                    "amount": np.nan,
                    "adjustment": "qfq",
                    "prev_close_raw": prev,
                }
            )
    MarketStore(home / "data").write_bars(pd.DataFrame(rows, columns=list(BAR_COLUMNS)))
    return [d.date() for d in days]


def _halted_events(account: str, wait_s: float = 30.0) -> list[object]:
    return account_events("oomrl.account.halted", account, wait_s)


def test_weekly_rebalance_commits_once_tags_the_run_and_publishes(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    from flows.rebalance import weekly_rebalance
    from oomrl.build_info import flow_version

    home = tmp_path / "home"
    days = seed_store(home)
    state = weekly_rebalance(account="flowacct", as_of=days[40], home=str(home), return_state=True)
    summary = state.result()
    # A fresh account starts on v1, not "builtin"
    v1 = StrategyVersions(home / "workspace").resolve("v1")
    assert summary["committed"] and summary["fills"] > 0 and summary["strategy_version"] == v1
    again = weekly_rebalance(account="flowacct", as_of=days[40], home=str(home))
    assert again["duplicate"] and not again["committed"]
    ledger = Ledger(f"sqlite:///{home / 'ledger.db'}")
    assert len(ledger.fills_frame("flowacct")) == summary["fills"]
    assert ledger.reconcile("flowacct") == []
    assert {
        "rebalance-flowacct-orders",
        "rebalance-flowacct-fills",
        "rebalance-flowacct-nav",
    } <= artifact_keys("rebalance-flowacct")
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert {"strategy:daily_momentum", "strategy-version:v1"} <= set(run.tags)
    # Package + git SHA, as every flow
    assert run.flow_version == flow_version() == weekly_rebalance.version
    fills = read_artifact("rebalance-flowacct-fills")
    assert "price (CNY)" in fills[0] and re.fullmatch(r"[\d,]+\.\d\d", fills[0]["price (CNY)"])
    assert "**v1 daily_momentum**" in str(read_artifact("rebalance-flowacct-nav"))
    skipped = weekly_rebalance(
        account="flowacct", as_of=date(2024, 2, 12), home=str(home), return_state=True
    )
    assert skipped.is_completed() and skipped.name == "NotASession"  # Spring Festival holiday
    assert "nothing traded, nothing failed" in skipped.message


def test_kill_switch_halt_emits_the_event_and_refuses_later_runs(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    from flows.rebalance import weekly_rebalance

    home = tmp_path / "home"
    days = seed_store(home, crash_from="2024-03-11")
    weekly_rebalance(account="haltacct", as_of=days[40], home=str(home))
    crashed = next(d for d in days if d >= date(2024, 3, 18))
    summary = weekly_rebalance(account="haltacct", as_of=crashed, home=str(home))
    assert summary["halted"]
    events = _halted_events("haltacct")
    assert events and events[0].payload["principal_loss"] >= 0.2
    later = weekly_rebalance(account="haltacct", as_of=days[-1], home=str(home), return_state=True)
    assert later.is_failed() and "HALTED" in later.message
    # A refusal is final: neither the flow nor its task retried
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(later.state_details.flow_run_id)
        assert run.run_count == 1
        (rebalance,) = [
            t
            for t in client.read_task_runs()
            if t.flow_run_id == run.id and t.name.startswith("rebalance-account")
        ]
        assert rebalance.run_count == 1
    assert Ledger(f"sqlite:///{home / 'ledger.db'}").rebalance_id("haltacct", days[-1]) is None


def test_replay_flow_publishes_the_comparison(tmp_path: Path) -> None:
    from flows.replay import replay_flow

    home = tmp_path / "home"
    seed_store(home)
    summaries = replay_flow(
        ["daily_momentum", "weekly_liquidity"],
        date(2024, 3, 1),
        date(2024, 4, 30),
        params={
            "daily_momentum": {"top_k": 3},
            "weekly_liquidity": {"min_adv": 1e6, "lookback": 20},
        },
        home=str(home),
    )
    assert [s["strategy"] for s in summaries] == ["daily_momentum", "weekly_liquidity"]
    assert summaries[0]["turnover"] > summaries[1]["turnover"] > 0
    assert "replay-summary" in artifact_keys("replay-")
