"""One repair per account, in the ledger database: race-safe lock, heartbeats, takeover of a silent
holder, release — on SQLite and (with OOMRL_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa

from oomrl.owners import HOST, Owner
from oomrl.repair.claims import ClaimBook, Heartbeat
from tests.conftest import postgres_schema


@pytest.fixture(params=["sqlite", "postgres"])
def book(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str | None
) -> Iterator[ClaimBook]:
    if request.param == "sqlite":
        yield ClaimBook(f"sqlite:///{tmp_path / 'ledger.db'}").create()
        return
    if not postgres_url:
        pytest.skip("OOMRL_TEST_POSTGRES_URL is not set")
    with postgres_schema(postgres_url, "oomrl_claims") as schema:
        claims = ClaimBook(postgres_url, schema=schema).create()
        try:
            yield claims
        finally:
            claims.engine.dispose()


def _age(book: ClaimBook, flow_run_id: str, seconds: float) -> None:
    """Move a run's last beat into the past, as if its process had died then."""
    with book.engine.begin() as conn:
        row = conn.execute(
            sa.select(book.table.c.beat_at).where(book.table.c.flow_run_id == flow_run_id)
        ).one()
        conn.execute(
            book.table.update()
            .where(book.table.c.flow_run_id == flow_run_id)
            .values(beat_at=row.beat_at - timedelta(seconds=seconds))
        )


def test_one_holder_per_account_and_release_frees_it(book: ClaimBook) -> None:
    book.register("run-a", "paper")
    book.register("run-b", "paper")
    book.register("run-c", "other")
    assert book.acquire("run-a", "paper") is None
    assert book.acquire("run-a", "paper") is None  # holding it already is holding it
    blocked = book.acquire("run-b", "paper")
    assert blocked is not None and blocked.flow_run_id == "run-a" and blocked.holds
    assert book.acquire("run-c", "other") is None  # other accounts are independent
    book.release("run-a")
    assert book.get("run-a") is None
    assert book.acquire("run-b", "paper") is None
    assert book.holder("paper").flow_run_id == "run-b"  # type: ignore[union-attr]


def test_a_silent_holder_is_taken_over_and_a_beating_one_is_not(book: ClaimBook) -> None:
    book.register("dead", "paper")
    book.register("live", "paper")
    assert book.acquire("dead", "paper") is None
    _age(book, "dead", 60)
    assert book.acquire("live", "paper", silent_s=120).flow_run_id == "dead"  # type: ignore[union-attr]
    _age(book, "dead", 90)
    assert book.get("dead").silent(120)  # type: ignore[union-attr]
    assert book.acquire("live", "paper", silent_s=120) is None
    assert book.get("dead") is None and not book.beat("dead")
    assert book.beat("live") and not book.get("live").silent(120)  # type: ignore[union-attr]


def test_an_unregistered_run_cannot_hold(book: ClaimBook) -> None:
    with pytest.raises(LookupError, match="register it first"):
        book.acquire("nobody", "paper")


def test_racing_runs_get_exactly_one_lock(book: ClaimBook) -> None:
    runs = [f"run-{i}" for i in range(6)]
    for run in runs:
        book.register(run, "paper")
    results: dict[str, object] = {}
    start = threading.Barrier(len(runs))

    def take(run: str) -> None:
        start.wait()
        results[run] = book.acquire(run, "paper")

    threads = [threading.Thread(target=take, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [run for run, holder in results.items() if holder is None]
    assert len(winners) == 1 and book.holder("paper").flow_run_id == winners[0]  # type: ignore[union-attr]


def test_the_heartbeat_thread_keeps_a_claim_alive(book: ClaimBook) -> None:
    book.register("run-a", "paper")
    _age(book, "run-a", 600)
    with Heartbeat(book, "run-a", interval_s=0.05):
        for _ in range(200):
            if not book.get("run-a").silent(120):  # type: ignore[union-attr]
                break
            threading.Event().wait(0.05)
    assert not book.get("run-a").silent(120)  # type: ignore[union-attr]


def test_waiting_for_a_busy_account_says_whom_it_waits_for_and_gives_up(book: ClaimBook) -> None:
    from oomrl.errors import AccountBusyError
    from oomrl.repair.claims import wait_to_hold

    book.register("first", "paper")
    book.register("second", "paper")
    wait_to_hold(book, "first", "paper", wait_s=0)
    said: list[str] = []
    with pytest.raises(
        AccountBusyError, match=r"is being repaired by run first \(pid \d+ on .*; after 0 s"
    ):
        wait_to_hold(book, "second", "paper", wait_s=0.2, poll_s=0.05, say=said.append)
    assert said and "being repaired by run first" in said[0]
    book.release("first")
    wait_to_hold(book, "second", "paper", wait_s=0)
    assert book.holder("paper").flow_run_id == "second"  # type: ignore[union-attr]


def _dead_owner() -> Owner:
    """The identity of a process that has exited (it ran, so its pid and start time were real)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = Owner(HOST, child.pid, psutil.Process(child.pid).create_time())
    child.wait()
    return owner


def test_a_holder_whose_process_died_is_taken_over_at_once(book: ClaimBook) -> None:
    book.register("killed-cli", "paper", owner=_dead_owner())
    book.register("next", "paper")
    with book.engine.begin() as conn:  # it held the account and beat a moment ago
        conn.execute(
            book.table.update()
            .where(book.table.c.flow_run_id == "killed-cli")
            .values(holds="paper")
        )
    assert book.get("killed-cli").gone() and not book.get("killed-cli").silent()  # type: ignore[union-attr]
    assert book.acquire("next", "paper") is None  # no 120 s wait: its owner is dead, not quiet
    assert book.get("killed-cli") is None
    assert [c.flow_run_id for c in book.live()] == ["next"]


def test_an_owner_on_another_host_is_judged_by_its_heartbeat(book: ClaimBook) -> None:
    book.register("remote", "paper", owner=Owner("elsewhere", 1, 0.0))
    book.register("local", "paper")
    assert book.acquire("remote", "paper") is None
    assert book.acquire("local", "paper").flow_run_id == "remote"  # type: ignore[union-attr]
    _age(book, "remote", 200)
    assert book.acquire("local", "paper") is None


def test_a_repair_claim_beats_while_it_lives_and_refuses_beyond_the_limit(book: ClaimBook) -> None:
    from oomrl.errors import TooManyRepairsError
    from oomrl.repair.claims import RepairClaim

    with (
        RepairClaim(book, "one", "paper", limit=2),
        RepairClaim(book, "two", "other", limit=2) as second,
    ):
        second.hold()
        assert book.holder("other").flow_run_id == "two"  # type: ignore[union-attr]
        with pytest.raises(
            TooManyRepairsError,
            match=r"2 repairs are running already, the most "
            r"OOMRL_REPAIR_MAX_RUNNING=2 allows \(runs one, two\)",
        ):
            RepairClaim(book, "three", "third", limit=2).__enter__()
        assert book.get("three") is None  # refused: nothing left behind
        with RepairClaim(book, "cli", "third"):  # no limit (a person at a terminal)
            assert {c.flow_run_id for c in book.live()} == {"one", "two", "cli"}
    assert book.live() == []


def test_a_claims_table_of_an_older_version_gets_its_owner_column(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE repair_claims (flow_run_id VARCHAR(64) PRIMARY KEY, "
                "account VARCHAR(64) NOT NULL, holds VARCHAR(64) UNIQUE, "
                "claimed_at DATETIME NOT NULL, beat_at DATETIME NOT NULL)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO repair_claims VALUES ('old', 'paper', NULL, "
                "'2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
    book = ClaimBook(url).create()
    assert book.get("old").owner is None  # type: ignore[union-attr]
    book.register("new", "paper")
    assert book.get("new").owner == str(Owner.me())  # type: ignore[union-attr]
    ClaimBook(url).create()  # a second time: nothing to add
