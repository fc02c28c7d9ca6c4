"""First use of a fresh database by several processes at once: every table the ledger database holds
(ledger, LLM budgets, repair claims, webhook deliveries) is created by one of them and found by the
others, on SQLite and PostgreSQL (the race that failed three of four first rebalances)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from oomrl.agent.capital import LLMBudgetBook
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.claims import ClaimBook
from tests.conftest import postgres_schema

RACERS = 6


@contextmanager
def fresh_database(
    kind: str, tmp_path: Path, postgres_url: str | None, n: int
) -> Iterator[tuple[str, str | None]]:
    """(url, schema) of an empty database."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / f'fresh-{n}.db'}", None
        return
    if not postgres_url:
        pytest.skip("OOMRL_TEST_POSTGRES_URL is not set")
    with postgres_schema(postgres_url, "oomrl_race") as schema:
        yield postgres_url, schema


def race(first_use: Callable[[], None], racers: int = RACERS) -> list[BaseException]:
    """Run `first_use` in `racers` threads released together; the errors they raised."""
    start = threading.Barrier(racers)
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            first_use()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return errors


def first_use(url: str, schema: str | None, engines: list[sa.Engine]) -> None:
    """What a first rebalance or repair does to the database."""
    ledger = Ledger(url, schema=schema)
    engines.append(ledger.engine)
    ledger.create_schema()
    LLMBudgetBook(ledger)
    engines.append(ClaimBook(url, schema=schema).create().engine)


@pytest.mark.slow  # a few rounds of racing threads on fresh databases
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_racing_first_users_create_every_table_once(
    kind: str, tmp_path: Path, postgres_url: str | None
) -> None:
    for n in range(3):  # the race is a matter of timing: several fresh databases
        with fresh_database(kind, tmp_path, postgres_url, n) as (url, schema):
            engines: list[sa.Engine] = []
            assert race(lambda: first_use(url, schema, engines)) == []  # noqa: B023 - run before the next round
            tables = set(sa.inspect(engines[0]).get_table_names(schema=schema))
            assert {
                "accounts",
                "strategy_versions",
                "llm_budgets",
                "llm_calls",
                "repair_claims",
            } <= tables
            for engine in engines:
                engine.dispose()


def test_webhook_deliveries_table_under_racing_first_use(tmp_path: Path) -> None:
    from oomrl.webhook.deliveries import DeliveryStore

    url = f"sqlite:///{tmp_path / 'deliveries.db'}"
    assert race(lambda: DeliveryStore(url) and None) == []
    assert DeliveryStore(url).claim("a-1", "paper", "test") is None
