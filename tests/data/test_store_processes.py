"""Real `oomrl ingest` processes against one store: run three at once, and SIGKILL one at random
points.

A small subset of the bundled sample keeps each process short; what is proved does not depend on
size: every write is one transaction committed by one catalog swap under one lock.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from oomrl.data.catalog import CATALOG_FILE
from oomrl.data.ingest import ingest
from oomrl.data.lock import HOLDER_FILE
from oomrl.data.sources.sample import SampleSource
from oomrl.data.store import MarketStore

pytestmark = pytest.mark.slow

ROUNDS = 20
FIRST = {"universe": "600519,000001", "start": "2025-06-02", "end": "2025-06-13"}
SECOND = {
    "universe": "600519,000001,300750,601318,600036",
    "start": "2025-06-02",
    "end": "2025-07-31",
}
PROCESS_TIMEOUT_S = 300


def oomrl_ingest(home: Path, subset: dict[str, str]) -> subprocess.Popen[str]:
    """Start `oomrl ingest` of a sample subset on OOMRL_HOME=home (the installed console script)."""
    script = Path(sys.executable).with_name("oomrl")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "orchestration"]
    args = [*command, "ingest", "--wait", str(PROCESS_TIMEOUT_S)]
    for name, value in subset.items():
        args += [f"--{name}", value]
    env = {**os.environ, "OOMRL_HOME": str(home), "COLUMNS": "200"}
    return subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = process.communicate(timeout=PROCESS_TIMEOUT_S)
    return process.returncode, out + err


@dataclass(frozen=True)
class State:
    """Everything a reader can see in a store, and how many ingests it records."""

    bars: pd.DataFrame
    index: pd.DataFrame
    membership: pd.DataFrame
    ingests: int

    @classmethod
    def of(cls, root: Path) -> State:
        store = MarketStore(root)
        return cls(
            store.read_bars(),
            store.read_index_levels(),
            store.read_membership(),
            len(store.manifest().get("ingests", [])),
        )

    def same_data(self, other: State) -> bool:
        return (
            self.bars.equals(other.bars)
            and self.index.equals(other.index)
            and self.membership.equals(other.membership)
        )


def clean_ingests(root: Path, *subsets: dict[str, str]) -> State:
    """The state after ingesting `subsets` one after the other, in this process."""
    store = MarketStore(root)
    for subset in subsets:
        ingest(SampleSource(), subset["universe"], subset["start"], subset["end"], store)
    return State.of(root)


def generation(root: Path) -> int:
    """The committed catalog's generation (store.json is replaced atomically, so it is always
    whole)."""
    return int(json.loads((root / CATALOG_FILE).read_text())["generation"])


def assert_no_orphans(root: Path) -> None:
    live = MarketStore(root).catalog().live_files()
    stored = {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}
    assert stored - live == {CATALOG_FILE, ".writer.lock"}, stored - live


def test_three_ingests_at_once_end_as_one_clean_ingest(tmp_path: Path) -> None:
    expected = clean_ingests(tmp_path / "reference", FIRST)
    waited = 0
    for round_ in range(ROUNDS):
        home = tmp_path / f"round-{round_}"
        processes = [oomrl_ingest(home, FIRST) for _ in range(3)]
        results = [finish(process) for process in processes]
        for code, output in results:
            assert code == 0 and "Traceback" not in output, output
        waited += sum("waiting up to" in output for _, output in results)
        state = State.of(home / "data")
        assert state.same_data(expected) and state.ingests == 3, f"round {round_}"
        assert MarketStore(home / "data").catalog().generation == 3
        assert_no_orphans(home / "data")
        shutil.rmtree(home)
    print(f"{ROUNDS} rounds of 3 concurrent ingests: {waited} waited for the lock")
    assert (
        waited >= ROUNDS // 2
    )  # the writers did meet (usually two of the three wait in every round)


def test_a_killed_ingest_leaves_the_store_unchanged_or_complete(tmp_path: Path) -> None:
    before = clean_ingests(tmp_path / "first", FIRST)
    after = clean_ingests(tmp_path / "both", FIRST, SECOND)
    assert not before.same_data(after)
    pristine = tmp_path / "pristine"
    shutil.copytree(tmp_path / "first", pristine / "data")
    assert generation(pristine / "data") == 1  # an ingest of SECOND commits generation 2

    def start(round_: int) -> tuple[Path, subprocess.Popen[str], float]:
        """A copy of the store after FIRST, an ingest of SECOND into it, and when it took the
        lock."""
        home = tmp_path / f"round-{round_}"
        shutil.copytree(pristine, home)
        process = oomrl_ingest(home, SECOND)
        while not (home / "data" / HOLDER_FILE).exists() and process.poll() is None:
            time.sleep(0.002)
        return home, process, time.monotonic()

    home, process, locked = start(
        -1
    )  # an undisturbed run measures the writing window: lock to commit
    while generation(home / "data") == 1 and process.poll() is None:
        time.sleep(0.002)
    window = time.monotonic() - locked
    assert finish(process)[0] == 0 and generation(home / "data") == 2
    shutil.rmtree(home)

    rng = random.Random(12)
    outcomes = {"unchanged": 0, "complete": 0}
    for round_ in range(ROUNDS):
        home, process, locked = start(round_)
        # Stratified over 1.5 x the window: kills while writing, around the commit, and after it.
        delay = (round_ + rng.random()) / ROUNDS * 1.5 * window
        if delay < window:
            time.sleep(max(0.0, locked + delay - time.monotonic()))
        # after the commit, whenever a loaded machine lets it happen: while it retires files or
        # exits
        else:
            while generation(home / "data") == 1 and process.poll() is None:
                time.sleep(0.002)
            time.sleep((delay - window) / 10)
        process.send_signal(signal.SIGKILL)
        finish(process)  # reaps it and closes its pipes
        root = home / "data"
        state = State.of(root)
        if state.same_data(before) and state.ingests == 1:
            outcomes["unchanged"] += 1
        else:
            assert state.same_data(after) and state.ingests == 2, (
                f"round {round_}: a state in between"
            )
            outcomes["complete"] += 1
        # The next ingest succeeds, clears what the killed one left, and completes the store.
        interrupted = (root / HOLDER_FILE).exists()
        if round_ % 5 == 0:  # as a process: no traceback, and it says what it recovered
            code, output = finish(oomrl_ingest(home, SECOND))
            assert code == 0 and "Traceback" not in output, output
            assert ("recovered: an earlier write by pid" in output) == interrupted, output
        else:
            ingest(
                SampleSource(),
                SECOND["universe"],
                SECOND["start"],
                SECOND["end"],
                MarketStore(root),
            )
        assert State.of(root).same_data(after)
        assert_no_orphans(root)
        shutil.rmtree(home)
    print(f"killed {ROUNDS} ingests over a {window:.2f} s writing window: {outcomes}")
    assert outcomes["unchanged"] > 0 and outcomes["complete"] > 0
