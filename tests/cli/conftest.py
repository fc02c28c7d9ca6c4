"""Fixtures of the CLI tests: a prepared OOMRL_HOME (sample data, account `paper`), a private copy
of it per test, and a check that a test left it exactly as it found it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from tests.cli.helpers import snapshot

SETTINGS_VARIABLES = (
    "OOMRL_CONFIG",
    "OOMRL_LEDGER_URL",
    "OOMRL_ACCOUNT",
    "OOMRL_KILL_THRESHOLD",
    "OOMRL_INITIAL_CASH",
    "OOMRL_LLM_PROVIDER",
    "OOMRL_LLM_MODEL",
    "OOMRL_MARKET_RULES",
)


@pytest.fixture(scope="session")
def prepared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OOMRL_HOME with the bundled sample ingested and the account `paper` rebalanced once."""
    from oomrl.data.sample import ensure_sample
    from oomrl.repair.trading import run_rebalance
    from oomrl.settings import get_settings

    home = tmp_path_factory.mktemp("cli") / "home"
    settings = get_settings(store={"home": home}, ledger={"url": None, "account": "paper"})
    ensure_sample(settings)
    run_rebalance(settings, "paper", date(2024, 7, 1))
    return home


@pytest.fixture()
def home(prepared_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the prepared home, named by OOMRL_HOME, with no other settings in force."""
    copy = tmp_path / "home"
    shutil.copytree(prepared_home, copy)
    for name in SETTINGS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OOMRL_HOME", str(copy))
    return copy


@pytest.fixture()
def unchanged(home: Path) -> Iterator[None]:
    """Asserts after the test that OOMRL_HOME is exactly as before (every file's hash, every
    folder)."""
    before = snapshot(home)
    yield
    assert snapshot(home) == before
