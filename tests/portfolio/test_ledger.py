"""The ledger on SQLite and PostgreSQL: once-only rebalances, conflicts, halts, versions, alerts,
frames."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from oomrl.errors import LedgerConflictError, OomrlError
from oomrl.portfolio.killswitch import AccountStatus
from oomrl.portfolio.ledger import Ledger, RebalanceRecord

DAY = date(2024, 7, 1)


def record(ledger: Ledger, day: date = DAY, revision: int | None = None) -> RebalanceRecord:
    """A rebalance that bought 1,000 shares of one name for 10,010.10 CNY all in."""
    state = ledger.account("acc")
    fills = pd.DataFrame(
        [
            {
                "date": day,
                "symbol": "600000.SH",
                "side": "buy",
                "quantity": 1000,
                "price": 10.005,
                "frictionless_price": 10.0,
                "commission": 5.0,
                "stamp_duty": 0.0,
                "transfer_fee": 0.1,
                "impact_cost": 5.0,
                "adv_participation": 0.001,
                "cash_delta_fen": -1_001_010,
            }
        ]
    )
    orders = pd.DataFrame(
        [
            {
                "symbol": "600000.SH",
                "side": "buy",
                "requested": 1050,
                "filled": 1000,
                "unfilled": 50,
                "reason": "lot",
            }
        ]
    )
    nav = pd.DataFrame(
        [
            {
                "date": pd.Timestamp(day),
                "nav": 999_989.9,
                "cash": 989_989.9,
                "market_value": 10_000.0,
                "frictionless_return": 0.0,
                "realized_return": -1.01e-5,
                "slippage_leakage": 1.01e-5,
                "turnover": 0.01,
                "costs": 10.1,
                "reward": -1.5e-5,
                "principal_loss": 1.01e-5,
                "strategy_version": "abc",
            }
        ]
    )
    return RebalanceRecord(
        "acc",
        day,
        "daily_momentum",
        "abc",
        state.revision if revision is None else revision,
        98_998_990,
        {"600000.SH": 1000},
        orders,
        fills,
        nav,
        0.0015,
        0.0,
    )


def test_rebalance_commits_once_and_reconciles(ledger: Ledger) -> None:
    ledger.open_account("acc", 1_000_000)
    assert ledger.commit_rebalance(record(ledger))
    assert not ledger.commit_rebalance(record(ledger))  # a re-run for the same date writes nothing
    fills = ledger.fills_frame("acc")
    assert len(fills) == 1 and fills["commission"].iloc[0] == 5.0
    assert ledger.reconcile("acc") == []
    state = ledger.account("acc")
    assert (state.cash_fen, state.positions, state.last_date) == (
        98_998_990,
        {"600000.SH": 1000},
        DAY,
    )
    assert ledger.orders_frame("acc", DAY)["reason"].tolist() == ["lot"]
    nav = ledger.nav_frame("acc")
    assert list(nav.columns) == [
        "date",
        "nav",
        "cash",
        "market_value",
        "frictionless_return",
        "realized_return",
        "slippage_leakage",
        "turnover",
        "costs",
        "reward",
        "principal_loss",
        "strategy_version",
    ]
    assert nav["reward"].iloc[0] == pytest.approx(-1.5e-5)


def test_stale_plan_is_a_conflict_and_writes_nothing(ledger: Ledger) -> None:
    ledger.open_account("acc", 1_000_000)
    with pytest.raises(LedgerConflictError, match="changed"):
        ledger.commit_rebalance(record(ledger, revision=7))
    assert ledger.rebalance_id("acc", DAY) is None
    assert ledger.fills_frame("acc").empty and ledger.nav_frame("acc").empty


def test_halted_account_cannot_commit_and_resume_is_recorded(ledger: Ledger) -> None:
    ledger.open_account("acc", 1_000_000)
    ledger.halt("acc", DAY, "principal loss 21%")
    state = ledger.account("acc")
    assert (state.status, state.halt_reason) == (AccountStatus.HALTED, "principal loss 21%")
    with pytest.raises(LedgerConflictError):
        ledger.commit_rebalance(record(ledger))
    ledger.resume("acc", by="tester")
    assert ledger.account("acc").status is AccountStatus.ACTIVE
    assert [e["kind"] for e in ledger.events("acc")] == ["halted", "resumed"]
    with pytest.raises(OomrlError, match="not halted"):
        ledger.resume("acc", by="tester")


def test_commit_with_halt_reason_halts_in_the_same_transaction(ledger: Ledger) -> None:
    ledger.open_account("acc", 1_000_000)
    rec = record(ledger)
    rec.halt_reason = "loss"
    assert ledger.commit_rebalance(rec)
    assert ledger.account("acc").status is AccountStatus.HALTED


def test_versions_alerts_and_filters(ledger: Ledger) -> None:
    ledger.open_account("acc", 1_000_000)
    assert ledger.active_version("acc") is None
    ledger.set_active_version("acc", "sha1", "daily_momentum")
    ledger.set_active_version("acc", "sha2", "weekly_liquidity")
    assert ledger.active_version("acc") == "sha2"
    assert ledger.active_strategy("acc") == ("sha2", "weekly_liquidity")
    assert ledger.insert_alert("acc", "a1", DAY, "drawdown", {"x": 1})
    assert not ledger.insert_alert("acc", "a1", DAY, "drawdown", {"x": 2})
    alerts = ledger.alerts("acc")
    assert [(a["alert_id"], a["payload"]) for a in alerts] == [("a1", {"x": 1})]
    ledger.commit_rebalance(record(ledger))
    assert len(ledger.fills_frame("acc", start=DAY, end=DAY)) == 1
    assert ledger.fills_frame("acc", start=date(2024, 7, 2)).empty


def test_reconcile_reports_tampering(ledger: Ledger) -> None:
    ledger.open_account("acc", 1_000_000)
    ledger.commit_rebalance(record(ledger))
    acc = ledger.t["accounts"]
    with ledger.engine.begin() as conn:
        conn.execute(acc.update().values(cash_fen=1))
        conn.execute(ledger.t["positions"].update().values(quantity=5))
    problems = ledger.reconcile("acc")
    assert any("cash" in p for p in problems) and any("600000.SH" in p for p in problems)


def test_accounts_validate(ledger: Ledger) -> None:
    with pytest.raises(OomrlError, match="no account"):
        ledger.account("ghost")
    with pytest.raises(OomrlError, match="initial cash"):
        ledger.open_account("acc", 0)
    assert ledger.open_account("acc", 5.0).cash_fen == 500
    assert ledger.open_account("acc", 9.0).cash_fen == 500  # opening again changes nothing


def test_plain_postgres_urls_name_an_installed_driver() -> None:
    from oomrl.portfolio.ledger_tables import driver_url

    assert driver_url("sqlite:///x.db") == "sqlite:///x.db"
    assert driver_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    chosen = driver_url("postgres://u@h:5432/db")
    assert chosen.endswith("://u@h:5432/db") and chosen.startswith(
        ("postgresql+psycopg://", "postgresql+psycopg2://")
    )
