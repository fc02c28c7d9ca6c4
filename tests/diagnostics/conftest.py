"""Builders of ledger-shaped NAV and fills frames for the diagnostics tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from oomrl.portfolio.ledger import Ledger, RebalanceRecord
from oomrl.settings import get_settings

START_CASH = 10_000_000.0
FILL_COLUMNS = [
    "date",
    "symbol",
    "side",
    "quantity",
    "price",
    "frictionless_price",
    "commission",
    "stamp_duty",
    "transfer_fee",
    "impact_cost",
    "adv_participation",
]


def nav_frame(
    returns: Sequence[float],
    *,
    leakage: float | Sequence[float] = 0.0,
    turnover: float | Sequence[float] = 0.0,
    start: str = "2025-01-02",
    version: str = "a1b2c3d4e5f6",
) -> pd.DataFrame:
    """A nav_frame (ledger columns) whose realized returns are `returns`."""
    r = np.asarray(returns, dtype=float)
    n = len(r)
    dates = pd.bdate_range(start, periods=n)
    nav = START_CASH * np.cumprod(1 + r)
    leak = np.broadcast_to(np.asarray(leakage, dtype=float), (n,))
    turn = np.broadcast_to(np.asarray(turnover, dtype=float), (n,))
    return pd.DataFrame(
        {
            "date": dates,
            "nav": nav,
            "cash": nav * 0.05,
            "market_value": nav * 0.95,
            "frictionless_return": r + leak,
            "realized_return": r,
            "slippage_leakage": leak,
            "turnover": turn,
            "costs": leak * nav,
            "reward": r,
            "principal_loss": 1 - nav / START_CASH,
            "strategy_version": version,
        }
    )


def fills_frame(
    dates: Sequence[pd.Timestamp],
    *,
    participation: float = 0.01,
    impact: float = 50.0,
    commission: float = 100.0,
) -> pd.DataFrame:
    """One buy fill per date with the given ADV participation and costs (CNY)."""
    rows = [
        {
            "date": d,
            "symbol": "600519.SH",
            "side": "buy",
            "quantity": 1000,
            "price": 1500.0,
            "frictionless_price": 1499.0,
            "commission": commission,
            "stamp_duty": 0.0,
            "transfer_fee": 15.0,
            "impact_cost": impact,
            "adv_participation": participation,
        }
        for d in dates
    ]
    return pd.DataFrame(rows, columns=FILL_COLUMNS)


def quiet_returns(n: int, seed: int = 0, scale: float = 0.004) -> np.ndarray:
    """Small positive-drift noise: no rule fires on it."""
    return np.random.default_rng(seed).normal(0.0005, scale, n)


def book_history(
    book: Ledger,
    account: str,
    nav: pd.DataFrame,
    fills: pd.DataFrame,
    strategy: str = "daily_momentum",
) -> None:
    """Write a NAV history and its fills into the real ledger as one committed rebalance."""
    book.open_account(account, START_CASH)
    book.set_active_version(account, "feedbeef" * 5, strategy)
    record = RebalanceRecord(
        account=account,
        as_of=nav["date"].iloc[-1].date(),
        strategy=strategy,
        strategy_version=str(nav["strategy_version"].iloc[-1]),
        expected_revision=0,
        cash_fen=int(START_CASH * 100),
        positions={},
        orders=pd.DataFrame(
            columns=["symbol", "side", "requested", "filled", "unfilled", "reason"]
        ),
        fills=fills.assign(cash_delta_fen=0),
        nav=nav,
        lam=0.0015,
        gamma=0.0,
    )
    assert book.commit_rebalance(record)


def seed_account_home(root: Path, account: str = "demo") -> None:
    """OOMRL_HOME `root` with the bundled sample store and `account` trading two versions over
    2024-07..2025-06 at beta 0.9 to the CSI 300, with a 6 % loss on the last day."""
    from oomrl.data.sample import ensure_sample
    from oomrl.metrics.attribution import benchmark_returns

    settings = get_settings(store={"home": root})
    bench = benchmark_returns(ensure_sample(settings)).loc["2024-07-01":"2025-06-30"]
    rng = np.random.default_rng(0)
    returns = 0.9 * bench.to_numpy() + rng.normal(0.0002, 0.004, len(bench))
    returns[-1] = -0.06
    nav = nav_frame(returns, leakage=0.0001, turnover=0.02)
    nav["date"] = bench.index
    nav["strategy_version"] = ["aaaa1111"] * 120 + ["bbbb2222"] * (len(bench) - 120)
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    book_history(ledger, account, nav, fills_frame(bench.index[-5:], participation=0.02))
