"""W1 (docs/bench.md): weekly top-K rebalance, the oomrl replay engine vs vectorbt, bt and
backtrader.

oomrl replays W1's strategy as any workspace's code runs: jailed in a strategy host
(bench/w1_workspace/strategies/bench_topk.py); its first run includes the host's start, its warm
runs are each served by a host started before the clock.

Run: `python bench/bench_replay.py [--n 300 3000] [--peer-python .venv-bench/bin/python]
[--sample]`. Peers run in a subprocess of `--peer-python` (default: this interpreter), so they can
live in a separate environment; a peer that is not installed prints "not installed". Prints seconds
and the ratio peer / oomrl (> 1: oomrl is faster). Times are measured after imports; never asserted.
`--sample` also times whole-history replays of the bundled real sample through the service (store
read included), as docs/bench.md quotes them.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

T_DAYS = 2500
FEE = 0.0015
CASH = 1e8
LOOKBACK = 20
FIRST_REBALANCE = 25
EVERY = 5
K_FOR_N = {300: 50, 3000: 300}
# Warm runs whose median is reported (oomrl and vectorbt alike): a garbage collection or another
# job's burst in one of them does not decide the figure. `--repeat` sets it (the peer subprocess
# gets it too).
REPEAT = 5
PEERS = ("vectorbt", "bt", "backtrader")
SAMPLE_START, SAMPLE_END = "2019-03-01", "2026-02-27"
SAMPLE_STRATEGIES = ("daily_momentum", "weekly_liquidity")
SAMPLE_BEFORE = {
    "daily_momentum": 11.1,
    "weekly_liquidity": 4.7,
}  # seconds, measured 2026-11-30 (docs/bench.md)


def workload(n: int) -> tuple[pd.DataFrame, list[int], int]:
    """Closes (T x N), rebalance day indices and K of W1 (docs/bench.md)."""
    rng = np.random.default_rng(0)
    returns = rng.normal(0.0003, 0.02, (T_DAYS, n))
    dates = pd.bdate_range("2010-01-01", periods=T_DAYS)
    # Main-board Shanghai codes (600000.SH, ...): the A-share rules read board lots and limits from
    # them.
    close = pd.DataFrame(
        100 * np.exp(np.cumsum(returns, axis=0)), dates, [f"{600000 + i:06d}.SH" for i in range(n)]
    )
    return close, list(range(FIRST_REBALANCE, T_DAYS, EVERY)), K_FOR_N[n]


def targets(close: pd.DataFrame, days: list[int], k: int) -> pd.DataFrame:
    """Target weights on rebalance days (NaN elsewhere): top-K by 20-day change, equal weight."""
    signal = close.pct_change(LOOKBACK).to_numpy()
    weights = np.full(close.shape, np.nan)
    for t in days:
        top = np.argsort(-np.nan_to_num(signal[t], nan=-np.inf), kind="stable")[:k]
        weights[t] = 0.0
        weights[t, top] = 1.0 / k
    return pd.DataFrame(weights, close.index, close.columns)


def numpy_floor(close: pd.DataFrame, weights: pd.DataFrame) -> float:
    """Frictionless floor: weights held between rebalances, flat fee on |dw|, pure numpy."""
    start = time.perf_counter()
    prices = close.to_numpy()
    w = weights.ffill().fillna(0.0).to_numpy()
    growth = prices[1:] / prices[:-1] - 1
    turnover = np.abs(np.diff(np.vstack([np.zeros(prices.shape[1]), w]), axis=0)).sum(axis=1)
    nav = np.cumprod(1 + (w[:-1] * growth).sum(axis=1) - FEE * turnover[1:])
    assert np.isfinite(nav[-1])
    return time.perf_counter() - start


def run_oomrl(close: pd.DataFrame, days: list[int], k: int, friction: bool, warm: bool) -> float:
    """Seconds of one replay of W1's jailed strategy: full A-share friction, or friction cut to the
    flat fee.

    First (`warm` False): the strategy host starts inside the time. Warm: a host started before the
    clock serves the replay (a warm interpreter, as a caller that keeps one has).
    """
    from oomrl.market.rules import AShareRules, FillPrice
    from oomrl.portfolio.market import MarketFrames
    from oomrl.portfolio.replay import replay

    rules = (
        AShareRules()
        if friction
        else AShareRules(
            commission_rate=FEE,
            commission_min=0.0,
            stamp_duty_rate=0.0,
            stamp_duty_rate_before=0.0,
            transfer_fee_rate=0.0,
            lot_size=1,
            impact_k=0.0,
            half_spread=0.0,
            max_adv_participation=1.0,
            fill_price=FillPrice.CLOSE,
            price_limits=False,
            t_plus_one=False,
        )
    )
    volume = pd.DataFrame(1e9, close.index, close.columns)  # deep books: the ADV cap never binds
    panels = {"open": close, "high": close, "low": close, "close": close, "volume": volume}
    strategy = w1_strategy(pre_started=warm)
    start = time.perf_counter()
    market = MarketFrames.build(panels, rules, limit_pct={s: 0.10 for s in close.columns})
    result = replay(
        strategy, {"k": k}, market, close.index[1], close.index[-1], rules, CASH, kill_threshold=1.0
    )
    assert len(result.nav) == len(close) - 1 and result.jail == "bwrap"
    assert int((result.nav["turnover"] > 0).sum()) == len([t for t in days if t + 1 < len(close)])
    return time.perf_counter() - start


def first_and_warm(
    run: Callable[[], float], warm: Callable[[], float] | None = None
) -> tuple[float, float]:
    """Seconds of a first run and the median of REPEAT warm runs after it (of `warm`, default
    `run`)."""
    first = run()
    return first, statistics.median((warm or run)() for _ in range(REPEAT))


def w1_strategy(pre_started: bool = False) -> Any:
    """W1's strategy in its workspace (bench/w1_workspace/strategies/bench_topk.py), run in a
    strategy host; `pre_started`: its host is started now, before any clock, and serves the one
    replay it opens."""
    from dataclasses import dataclass

    from oomrl.portfolio.hosting import WorkspaceStrategy

    @dataclass(frozen=True)
    class PreStarted(WorkspaceStrategy):
        """A WorkspaceStrategy whose host was started already."""

        started: Any = None

        def start(self, coverage: bool = False) -> tuple[Any, str]:
            return self.started  # type: ignore[no-any-return]

    source = WorkspaceStrategy(Path(__file__).resolve().parent / "w1_workspace", "bench_topk")
    return PreStarted(source.root, source.name, started=source.start()) if pre_started else source


def host_start_seconds() -> float:
    """Seconds to start (and stop) one strategy host for W1's workspace."""
    start = time.perf_counter()
    host, _ = w1_strategy().start()
    seconds = time.perf_counter() - start
    host.close()
    return seconds


def run_sample(strategy: str, home: Path) -> tuple[float, int]:
    """Seconds and rebalances of one whole-history replay of the sample (kill switch off), store
    read included."""
    import pyarrow.dataset  # noqa: F401  # imported on the first filtered read: imports stay out of the time

    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.service import run_replay
    from oomrl.settings import OomrlSettings

    settings = OomrlSettings(store={"home": home})
    ensure_sample(settings)  # the first use ingests the sample: not part of a replay
    start = time.perf_counter()
    result = run_replay(
        settings,
        strategy,
        pd.Timestamp(SAMPLE_START).date(),
        pd.Timestamp(SAMPLE_END).date(),
        kill_threshold=1.0,
    )
    return time.perf_counter() - start, int(result.summary()["rebalances"])


def run_peer(name: str, n: int) -> dict[str, Any]:
    """Time one peer in this process (called as `--peer NAME --n N` in the peer environment)."""
    close, days, k = workload(n)
    weights = targets(close, days, k)
    runner = {"vectorbt": _vectorbt, "bt": _bt, "backtrader": _backtrader}[name]
    try:
        return runner(close, weights)
    except ImportError:
        return {"peer": name, "status": "not installed"}


def _vectorbt(close: pd.DataFrame, weights: pd.DataFrame) -> dict[str, Any]:
    import vectorbt as vbt

    def once() -> float:
        start = time.perf_counter()
        vbt.Portfolio.from_orders(
            close,
            size=weights,
            size_type="targetpercent",
            group_by=True,
            cash_sharing=True,
            call_seq="auto",
            fees=FEE,
            init_cash=CASH,
        ).value()
        return time.perf_counter() - start

    first, warm = first_and_warm(once)
    return {"peer": "vectorbt", "seconds": warm, "first_run": first}


def _bt(close: pd.DataFrame, weights: pd.DataFrame) -> dict[str, Any]:
    import bt

    start = time.perf_counter()
    dates = list(weights.dropna(how="all").index)
    strategy = bt.Strategy(
        "w1", [bt.algos.RunOnDate(*dates), bt.algos.WeighTarget(weights), bt.algos.Rebalance()]
    )
    test = bt.Backtest(
        strategy,
        close,
        initial_capital=CASH,
        commissions=lambda q, p: abs(q) * p * FEE,
        integer_positions=False,
    )
    bt.run(test)
    return {"peer": "bt", "seconds": time.perf_counter() - start}


def _backtrader(close: pd.DataFrame, weights: pd.DataFrame) -> dict[str, Any]:
    import backtrader as btr

    rebalance = {d.date(): row.dropna() for d, row in weights.dropna(how="all").iterrows()}

    class TopK(btr.Strategy):
        def next(self) -> None:
            row = rebalance.get(self.datas[0].datetime.date(0))
            if row is None:
                return
            for data in self.datas:
                self.order_target_percent(data, target=float(row.get(data._name, 0.0)))

    start = time.perf_counter()
    cerebro = btr.Cerebro(stdstats=False)
    for symbol in close.columns:
        frame = pd.DataFrame({c: close[symbol] for c in ("open", "high", "low", "close")})
        frame["volume"] = 1e9
        cerebro.adddata(btr.feeds.PandasData(dataname=frame), name=symbol)
    cerebro.broker.setcash(CASH)
    cerebro.broker.setcommission(commission=FEE)
    cerebro.addstrategy(TopK)
    cerebro.run()
    return {"peer": "backtrader", "seconds": time.perf_counter() - start}


def serve_vectorbt(n: int) -> None:
    """Answer each line on stdin with the seconds of one warm vectorbt run (`--serve-vectorbt`): the
    paired measure alternates its runs with oomrl's, so both see the same load."""
    import vectorbt as vbt

    close, days, k = workload(n)
    weights = targets(close, days, k)

    def once() -> float:
        start = time.perf_counter()
        vbt.Portfolio.from_orders(
            close,
            size=weights,
            size_type="targetpercent",
            group_by=True,
            cash_sharing=True,
            call_seq="auto",
            fees=FEE,
            init_cash=CASH,
        ).value()
        return time.perf_counter() - start

    once()  # the first run compiles
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps(once()), flush=True)


def paired(python: str, n: int, rounds: int) -> None:
    """Rounds of one warm oomrl replay (full friction) then one warm vectorbt run, side by side."""
    close, days, k = workload(n)
    peer = subprocess.Popen(
        [python, __file__, "--serve-vectorbt", "--n", str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert peer.stdin is not None and peer.stdout is not None
    try:
        if peer.stdout.readline().strip() != "ready":
            print("  vectorbt (paired)             not installed")
            return
        run_oomrl(close, days, k, True, False)  # the first run in this process
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(run_oomrl(close, days, k, True, True))
            peer.stdin.write("run\n")
            peer.stdin.flush()
            theirs.append(float(peer.stdout.readline()))
        ratios = sorted(v / o for o, v in zip(ours, theirs, strict=True))
        print(
            f"W1 N={n} paired, {rounds} rounds (oomrl full then vectorbt, warm): oomrl median "
            f"{statistics.median(ours):.3f} s, vectorbt median "
            f"{statistics.median(theirs):.3f} s; vectorbt / oomrl "
            f"per round: median {statistics.median(ratios):.2f} (min {ratios[0]:.2f}, max "
            f"{ratios[-1]:.2f})"
        )
    finally:
        peer.kill()
        peer.wait()


def peer_subprocess(python: str, name: str, n: int, timeout: float) -> dict[str, Any]:
    """Run one peer in `python`; 'not installed' / 'timeout' / 'error' instead of a crash."""
    try:
        done = subprocess.run(
            [python, __file__, "--peer", name, "--n", str(n), "--repeat", str(REPEAT)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=Path(__file__).resolve().parent.parent,
        )
    except subprocess.TimeoutExpired:
        return {"peer": name, "status": f"timeout after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"peer": name, "status": f"error: {(done.stderr or done.stdout).strip()[-300:]}"}
    return json.loads(lines[-1])


def main() -> None:
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, nargs="+", default=[300, 3000])
    parser.add_argument("--peer", choices=PEERS)
    parser.add_argument("--peers", nargs="*", default=list(PEERS))
    parser.add_argument("--peer-python", default=sys.executable)
    parser.add_argument(
        "--repeat", type=int, default=REPEAT, help="warm runs whose median is reported"
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--all-peers",
        action="store_true",
        help="also run backtrader at N > 1000 (it takes well over 30 minutes)",
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help=f"also replay the bundled sample {SAMPLE_START}..{SAMPLE_END} with each bundled "
        "strategy",
    )
    parser.add_argument(
        "--sample-home",
        type=Path,
        default=None,
        help="oomrl home holding (or receiving) the ingested sample; default: a temporary one",
    )
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also alternate warm oomrl and vectorbt runs this many rounds (ratio per round)",
    )
    parser.add_argument("--serve-vectorbt", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    REPEAT = max(args.repeat, 1)
    if args.serve_vectorbt:
        serve_vectorbt(args.n[0])
        return
    if args.peer:
        print(json.dumps(run_peer(args.peer, args.n[0])))
        return
    start = time.perf_counter()
    import oomrl.portfolio.service  # noqa: F401  # loads numba and the compiled broker kernel

    print(
        "imports of the replay path (numba and the compiled kernel's load included, "
        "outside every time "
        f"below): {time.perf_counter() - start:.2f} s"
    )
    if args.sample:
        with tempfile.TemporaryDirectory() as scratch:
            home = args.sample_home or Path(scratch)
            print(f"Sample replays {SAMPLE_START}..{SAMPLE_END} (store read included)")
            for strategy in SAMPLE_STRATEGIES:
                seconds, rebalances = run_sample(strategy, home)
                print(
                    f"  {strategy:<30}{seconds:8.3f} s  ({rebalances} rebalances; "
                    f"{SAMPLE_BEFORE[strategy] / seconds:.1f}x faster than "
                    f"{SAMPLE_BEFORE[strategy]} s before)"
                )
    for n in args.n:
        close, days, k = workload(n)
        floor = numpy_floor(close, targets(close, days, k))
        # The first run in this process (the host's start inside the time) and the median of REPEAT
        # warm ones (each served by a host started before the clock), as vectorbt's first and warm
        # runs.
        first_full, full = first_and_warm(
            *(functools.partial(run_oomrl, close, days, k, True, warm) for warm in (False, True))
        )
        first_flat, flat = first_and_warm(
            *(functools.partial(run_oomrl, close, days, k, False, warm) for warm in (False, True))
        )
        starts = statistics.median(host_start_seconds() for _ in range(REPEAT))
        print(
            f"W1 N={n} T={T_DAYS} K={k} rebalances={len(days)}; the strategy runs jailed "
            "in a strategy "
            f"host (one start: {starts:.2f} s)"
        )
        print(f"  numpy frictionless floor      {floor:8.3f} s")
        print(
            f"  oomrl full A-share friction   {full:8.3f} s (first run, host start "
            f"included: {first_full:.3f} s)"
        )
        print(
            f"  oomrl flat fee (like-for-like){flat:8.3f} s (first run, host start "
            f"included: {first_flat:.3f} s)"
        )
        for name in args.peers:
            if name == "backtrader" and n > 1000 and not args.all_peers:
                print(f"  {name:<30}skipped at N={n} (--all-peers to run it)")
                continue
            result = peer_subprocess(args.peer_python, name, n, args.timeout)
            if "seconds" not in result:
                print(f"  {name:<30}{result['status']}")
                continue
            extra = f" (first run {result['first_run']:.3f} s)" if "first_run" in result else ""
            firsts = (
                f"  first/first {result['first_run'] / first_full:6.2f}"
                if "first_run" in result
                else ""
            )
            print(
                f"  {name:<30}{result['seconds']:8.3f} s{extra}  ratio peer/oomrl-flat "
                f"{result['seconds'] / flat:6.2f}  peer/oomrl-full "
                f"{result['seconds'] / full:6.2f}{firsts}"
            )
        if args.paired:
            paired(args.peer_python, n, args.paired)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
