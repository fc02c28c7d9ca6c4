"""Shared builders for market-data tests: small, valid bar frames that each test then breaks on
purpose."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.market.calendar import sessions

BarsFactory = Callable[..., pd.DataFrame]


def make_bars(
    symbols: tuple[str, ...] = ("600519.SH", "300750.SZ"),
    start: str = "2024-07-01",
    days: int = 5,
    adjustment: str = "none",
    step: float = 0.01,
) -> pd.DataFrame:
    """Valid bars: prices rise `step` per session, volume in shares, amount = volume x mid price."""
    dates = sessions(start, pd.Timestamp(start) + pd.Timedelta(days=days * 3))[:days]
    rows = []
    for n, symbol in enumerate(symbols):
        close = 10.0 * (n + 1)
        prev = np.nan
        for day in dates:
            new_close = round(close * (1 + step), 2)
            rows.append(
                {
                    "date": day,
                    "symbol": symbol,
                    "open": close,
                    "high": max(close, new_close) + 0.05,
                    "low": min(close, new_close) - 0.05,
                    "close": new_close,
                    "volume": 1_000_000.0,
                    "amount": 1_000_000.0 * (close + new_close) / 2,
                    "adjustment": adjustment,
                    "prev_close_raw": prev,
                    "factor": 1.0,
                    "st": 0.0,
                    "list_date": np.nan,
                }
            )
            prev, close = new_close, new_close
    return pd.DataFrame(rows)


@pytest.fixture()
def bars() -> BarsFactory:
    """The make_bars builder."""
    return make_bars


@contextmanager
def writer_elsewhere(root: Path) -> Iterator[None]:
    """Hold the store's writer lock from another thread (as another process would) for the block."""
    from oomrl.data.store import MarketStore

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with MarketStore(root).transaction():
            holding.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(30)
    try:
        yield
    finally:
        release.set()
        thread.join(30)
