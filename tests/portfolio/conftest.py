"""Ledger fixture: every ledger test runs on SQLite and, when OOMRL_TEST_POSTGRES_URL is set, PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.ledger_tables import driver_url


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str | None
           ) -> Iterator[Ledger]:
    """A fresh ledger; on PostgreSQL in a unique schema dropped afterwards."""
    if request.param == "sqlite":
        book = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
        book.create_schema()
        yield book
        return
    if not postgres_url:
        pytest.skip("OOMRL_TEST_POSTGRES_URL is not set")
    schema = f"oomrl_test_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(driver_url(postgres_url))
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    book = Ledger(postgres_url, schema=schema)
    book.create_schema()
    try:
        yield book
    finally:
        book.engine.dispose()
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
