"""Ledger fixture: every ledger test runs on SQLite and, when OOMRL_TEST_POSTGRES_URL is set,
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from oomrl.portfolio.ledger import Ledger
from tests.conftest import postgres_schema


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str | None
) -> Iterator[Ledger]:
    """A fresh ledger; on PostgreSQL in a unique schema dropped afterwards."""
    if request.param == "sqlite":
        book = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
        book.create_schema()
        yield book
        return
    if not postgres_url:
        pytest.skip("OOMRL_TEST_POSTGRES_URL is not set")
    with postgres_schema(postgres_url, "oomrl_test") as schema:
        book = Ledger(postgres_url, schema=schema)
        book.create_schema()
        try:
            yield book
        finally:
            book.engine.dispose()
