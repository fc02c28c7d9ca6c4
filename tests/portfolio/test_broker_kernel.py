"""The compiled broker kernel and the numpy broker fill the same: every field, to the last bit.

Hostile sessions (NaN prices, suspensions, limits, missing ADV, odd lots on every board, T+1, cash
too short for the buys and minimum commissions that defeat shrinking) go through three engines: the
numpy PaperBroker (`kernel=False`), the numba-compiled kernel, and the kernel's plain Python source
(numba's machine code reports no coverage; the source is what the compiled code is built from).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomrl.market.rules import AShareRules, FillPrice
from oomrl.portfolio import broker_kernel
from oomrl.portfolio.broker import Execution, PaperBroker, Unfilled, session_tables
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.replay import replay_setup
from oomrl.portfolio.setup import rebalance_setup
from oomrl.settings import OomrlSettings
from tests.portfolio.factories import flat_panels, random_panels, set_cell
from tests.portfolio.inprocess import InProcessStrategy
from tests.portfolio.test_sample_replay import START, sample_market

SYMBOLS = ["600000.SH", "600001.SH", "300750.SZ", "688981.SH", "830799.BJ", "000001.SZ"]
FIELDS = (
    "requested",
    "filled",
    "price",
    "frictionless_price",
    "value",
    "commission",
    "stamp_duty",
    "transfer_fee",
    "impact_cost",
    "adv_participation",
    "reason",
)
PYTHON = {"fill_session": broker_kernel.fill_session, "trade_weights": broker_kernel.trade_weights}


RULES = [
    AShareRules(),
    AShareRules(price_limits=False, t_plus_one=False, fill_price=FillPrice.OPEN),
]


def hostile_market(seed: int, rules: AShareRules = RULES[0]) -> MarketFrames:
    """Random panels with a suspension, limit-up and limit-down closes, NaN and zero volume; odd
    seeds trade thin books (the ADV cap binds) and seed 3 lists its last symbol only on day 30."""
    panels = random_panels(SYMBOLS, days=60, seed=seed, volume=5e6 if seed % 2 == 0 else 3e3)
    if seed == 3:
        for frame in panels.values():
            frame.iloc[:30, -1] = np.nan
    rng = np.random.default_rng(seed)
    for day in range(25, 60):
        symbol = SYMBOLS[int(rng.integers(len(SYMBOLS)))]
        kind = int(rng.integers(4))
        if kind == 0:
            set_cell(panels, day, symbol, close=np.nan, open=np.nan, high=np.nan, low=np.nan)
        elif kind == 1:
            set_cell(panels, day, symbol, volume=0.0)
        elif kind == 2:
            previous = panels["close"][symbol].iloc[day - 1]
            set_cell(
                panels,
                day,
                symbol,
                close=previous * 1.1,
                high=previous * 1.1,
                low=previous * 1.1,
                open=previous * 1.1,
            )
        else:
            set_cell(panels, day, symbol, volume=np.nan)
    return MarketFrames.build(panels, rules)


def assert_same(a: Execution, b: Execution) -> None:
    for field in FIELDS:
        left, right = np.asarray(getattr(a, field)), np.asarray(getattr(b, field))
        assert left.shape == right.shape, field
        assert np.array_equal(left.astype(float), right.astype(float), equal_nan=True), (
            field,
            left,
            right,
        )
    assert (a.cash_before_fen, a.cash_after_fen) == (b.cash_before_fen, b.cash_after_fen)


def engines(market: MarketFrames, rules: AShareRules | None = None) -> list[PaperBroker]:
    """The numpy broker, the compiled kernel (when numba is there) and the kernel's Python
    source."""
    rules = rules or AShareRules()
    brokers = [PaperBroker(market, rules, kernel=False), PaperBroker(market, rules, kernel=False)]
    brokers[1].kernel = PYTHON
    if broker_kernel.COMPILED is not None:
        brokers.append(PaperBroker(market, rules))
    return brokers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 3), day=st.integers(21, 59), rules=st.sampled_from(RULES), data=st.data()
)
def test_every_engine_fills_a_hostile_session_the_same(
    seed: int, day: int, rules: AShareRules, data: st.DataObject
) -> None:
    market = hostile_market(seed, rules)
    n = len(SYMBOLS)
    quantities = st.integers(-5_000, 5_000) | st.sampled_from(
        [0, 1, 99, 100, 150, 199, 200, 201, -50, -250]
    )
    orders = np.array(data.draw(st.lists(quantities, min_size=n, max_size=n)), dtype=np.int64)
    held = np.array(
        data.draw(st.lists(st.integers(0, 3_000), min_size=n, max_size=n)), dtype=np.int64
    )
    today = np.array(
        data.draw(st.lists(st.integers(0, 300), min_size=n, max_size=n)), dtype=np.int64
    )
    cash_fen = data.draw(st.sampled_from([0, 1_000, 500_000, 2_000_000, 10**10]))
    results = [b.execute(day, orders, held, cash_fen, today) for b in engines(market, rules)]
    for other in results[1:]:
        assert_same(results[0], other)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 3), day=st.integers(1, 59), rules=st.sampled_from(RULES), data=st.data())
def test_every_engine_trades_target_weights_the_same(
    seed: int, day: int, rules: AShareRules, data: st.DataObject
) -> None:
    market = hostile_market(seed, rules)
    raw = data.draw(st.lists(st.floats(0, 1), min_size=len(SYMBOLS), max_size=len(SYMBOLS)))
    weights = np.array(raw) / max(sum(raw), 1.0)
    held = np.array(
        data.draw(st.lists(st.integers(0, 3_000), min_size=len(SYMBOLS), max_size=len(SYMBOLS))),
        dtype=np.int64,
    )
    nav = data.draw(st.sampled_from([1e5, 1e6, 3e7]))
    results = [b.trade(day, weights, held, nav, int(nav * 50)) for b in engines(market, rules)]
    for other in results[1:]:
        assert_same(results[0], other)


def test_minimum_commissions_that_defeat_shrinking_leave_no_buy_in_every_engine() -> None:
    # A 1,000 CNY minimum commission on a 1,000 CNY buy with 1,500 CNY of cash: each proportional
    # pass shrinks the value but not the fixed fee (1,000 -> 749 -> 642 -> 586 -> 553 shares, still
    # over), so after the last pass nothing is bought.
    rules = AShareRules(
        fill_price=FillPrice.CLOSE, commission_min=1_000.0, half_spread=0.0, impact_k=0.0
    )
    market = MarketFrames.build(flat_panels(["830799.BJ"], price=1.0), rules)
    results = [
        b.execute(25, np.array([1_000]), np.array([0]), 150_000) for b in engines(market, rules)
    ]
    assert results[0].filled[0] == 0 and results[0].reason[0] == Unfilled.CASH
    assert results[0].cash_after_fen == 150_000
    for other in results[1:]:
        assert_same(results[0], other)


def test_session_tables_equal_each_execution_tabulated_on_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    market = hostile_market(1)
    broker = PaperBroker(market, AShareRules())
    rng = np.random.default_rng(3)
    executions = [
        broker.execute(
            t, rng.integers(-400, 400, len(SYMBOLS)), rng.integers(0, 500, len(SYMBOLS)), 10**8
        )
        for t in range(21, 60)
    ]
    # Several blocks, one of them short
    monkeypatch.setattr("oomrl.portfolio.broker.TABLE_BLOCK", 7)
    fills, orders = session_tables(executions, market.dates.values, market.symbol_names)
    one_by_one = [
        (e.fill_columns(market.symbol_names), e.order_columns(market.symbol_names))
        for e in executions
    ]
    for got, part in ((fills, 0), (orders, 1)):
        chunks = [c[part] for c in one_by_one if len(c[part]["date"])]
        expected = pd.DataFrame({k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]})
        pd.testing.assert_frame_equal(pd.DataFrame(got), expected, check_exact=True)
    assert session_tables([], market.dates.values, market.symbol_names) == ({}, {})


@pytest.mark.slow
def test_the_numpy_broker_replays_the_sample_exactly_as_the_compiled_kernel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if broker_kernel.COMPILED is None:
        pytest.skip("numba is not installed: only the numpy broker runs")
    kernels = broker_kernel.COMPILED
    market, membership = sample_market()
    settings_ = OomrlSettings(store={"home": tmp_path}, ledger={"kill_threshold": 1.0})
    setup = rebalance_setup(
        InProcessStrategy.bundled("daily_momentum"), "kernel", settings_, membership
    )
    compiled = replay_setup(setup, market, START, "2025-03-31", settings_.ledger.initial_cash)
    monkeypatch.setattr(broker_kernel, "COMPILED", None)
    numpy_only = replay_setup(setup, market, START, "2025-03-31", settings_.ledger.initial_cash)
    for name in ("nav", "fills", "orders", "actions"):
        pd.testing.assert_frame_equal(
            getattr(compiled, name), getattr(numpy_only, name), check_exact=True
        )
    assert len(compiled.fills) > 1_000
    # The broker passes the argument layout the kernels were loaded with at import: nothing compiled
    # a second version inside the replay.
    assert {name: len(kernel.signatures) for name, kernel in kernels.items()} == {
        "fill_session": 1,
        "trade_weights": 1,
    }


def test_the_kernel_can_be_switched_off_and_survives_a_missing_numba(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OOMRL_BROKER_KERNEL", "0")
    assert broker_kernel._compile() is None
    monkeypatch.delenv("OOMRL_BROKER_KERNEL")
    # `import numba` raises ImportError
    monkeypatch.setitem(__import__("sys").modules, "numba", None)
    assert broker_kernel._compile() is None


@pytest.mark.slow
def test_without_a_writable_cache_directory_the_kernel_compiles_in_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    numba = pytest.importorskip("numba")
    real = numba.njit

    def no_cache_dir(*args: object, **kwargs: object) -> object:
        if kwargs.get("cache"):  # what numba raises when no cache locator can write
            raise RuntimeError("cannot cache function: no locator available for file")
        return real(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache_dir)
    kernels = broker_kernel._compile()
    assert kernels is not None and set(kernels) == {"fill_session", "trade_weights"}
    market = hostile_market(2)
    compiled, reference = (
        PaperBroker(market, AShareRules()),
        PaperBroker(market, AShareRules(), kernel=False),
    )
    compiled.kernel = kernels
    orders = np.array([300, -200, 100, 250, 0, 100], dtype=np.int64)
    held = np.array([0, 500, 0, 0, 100, 0], dtype=np.int64)
    assert_same(
        compiled.execute(40, orders, held, 10**8), reference.execute(40, orders, held, 10**8)
    )


@pytest.mark.slow
def test_a_damaged_cache_file_recompiles_the_kernel_instead_of_breaking_the_import(
    tmp_path: Path,
) -> None:
    pytest.importorskip("numba")
    # A copy of the module (it imports only numpy and numba) with its own cache directory.
    (tmp_path / "kernel_copy.py").write_text(Path(broker_kernel.__file__).read_text())
    probe = "import kernel_copy; print('compiled' if kernel_copy.COMPILED else 'numpy')"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", probe],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
        )

    assert run().stdout.strip() == "compiled"
    damaged = sorted((tmp_path / "__pycache__").glob("*.nbc"))
    assert damaged
    for path in damaged:
        path.write_bytes(b"not a pickle")
    again = run()
    assert again.stdout.strip() == "compiled"
    assert "could not be loaded from numba's cache; compiling it in this process" in again.stderr


@pytest.mark.parametrize("kernel", [True, False])
def test_arrays_of_the_wrong_length_are_refused_by_name(kernel: bool) -> None:
    broker = PaperBroker(hostile_market(0), AShareRules(), kernel=kernel)
    n = len(SYMBOLS)
    with pytest.raises(ValueError, match="held|shape"):
        broker.execute(30, np.ones(n, dtype=np.int64), np.zeros(n - 1, dtype=np.int64), 10**8)
    with pytest.raises(ValueError, match="weights|shape"):
        broker.trade(30, np.full(n + 2, 0.1), np.zeros(n, dtype=np.int64), 1e6, 10**8)
    if kernel and broker.kernel is not None:
        with pytest.raises(ValueError, match="bought_today has shape"):
            broker.execute(
                30, np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64), 10**8, np.zeros(2)
            )
