"""Fixtures of the agent tests: a sample-data home shared by the module, an autopsy from a real
replay."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oomrl.repair import promotion
from oomrl.settings import get_settings
from tests.agent.doc_edges import edges_of_test, takes_documented_edges


@pytest.fixture(autouse=True)
def takes_the_transitions_the_docs_name(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A test docs/agent.md names for a transition fails unless it takes that transition."""
    if request.node.originalname not in edges_of_test():
        yield
        return
    with takes_documented_edges(request.node.originalname, monkeypatch):
        yield


@pytest.fixture(scope="session")
def sample_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OOMRL_HOME/data holding the bundled sample, ingested once per session."""
    from oomrl.data.sample import ensure_sample

    home = tmp_path_factory.mktemp("agent-sample-home")
    ensure_sample(get_settings(store={"home": home}))
    return home / "data"


@pytest.fixture()
def repair_home(tmp_path: Path, sample_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh OOMRL_HOME with a copy of the sample data and the account `paper` in its ledger
    (every door refuses repairs for accounts the ledger does not hold)."""
    from oomrl.portfolio.ledger import Ledger

    home = tmp_path / "home"
    shutil.copytree(sample_data, home / "data")
    monkeypatch.setenv("OOMRL_HOME", str(home))
    ledger = Ledger(get_settings().ledger_url)
    ledger.create_schema()
    ledger.open_account("paper", 10_000_000)
    return home


@pytest.fixture(scope="session")
def daily_momentum_autopsy(sample_data: Path) -> dict[str, Any]:
    """The first autopsy the diagnostics raise on a replay of daily_momentum from 2024-07-01."""
    from oomrl.checkout import repo_root
    from oomrl.data.store import MarketStore
    from oomrl.diagnostics.critic import autopsy_for
    from oomrl.diagnostics.rules import AlertConfig, evaluate
    from oomrl.metrics.io import returns_from_levels
    from oomrl.portfolio.hosting import WorkspaceStrategy
    from oomrl.portfolio.market import panels_from_bars
    from oomrl.portfolio.replay import replay

    store = MarketStore(sample_data)
    panels = panels_from_bars(store.read_bars("2024-03-01", "2024-08-30"))
    result = replay(
        WorkspaceStrategy(repo_root(), "daily_momentum"),
        None,
        panels,
        "2024-07-01",
        "2024-08-30",
        version="bundled",
    )
    benchmark = returns_from_levels(store.read_index("000300"))
    config = AlertConfig()
    for day in result.nav["date"].dt.date.iloc[10:]:  # execution rules need a few sessions
        alerts = evaluate(result.nav, result.fills, config, day, "paper", benchmark)
        if alerts:
            autopsy = autopsy_for(
                alerts[0],
                result.nav,
                result.fills,
                config,
                module="strategies.daily_momentum",
                benchmark=benchmark,
            )
            return autopsy.model_dump(mode="json")
    raise AssertionError("the daily_momentum replay raised no alert")


@pytest.fixture()
def on_probation(repair_home: Path, tmp_path: Path) -> dict[str, Any]:
    """v1 trades `paper` through OPENED; v2 (a weekly daily_momentum, its mandate's constraints in
    its notes, its repair's trail in a run folder) is promoted with a probation of SESSIONS
    sessions."""
    from datetime import date

    from oomrl.portfolio.ledger import Ledger
    from oomrl.repair.versions import StrategyVersions
    from tests.agent.probation_book import DAILY, OPENED, SESSIONS, WEEKLY, champion_trades

    settings = get_settings()
    ledger = Ledger(settings.ledger_url)
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    versions.init()
    versions.activate("v1", "paper", "daily_momentum")
    champion_trades(settings, ledger, date(2025, 11, 24), OPENED)
    candidate = versions.clone_to(tmp_path / "candidate", at="v1")
    source = candidate / "strategies" / "daily_momentum.py"
    text = source.read_text()
    assert DAILY in text
    source.write_text(text.replace(DAILY, WEEKLY))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "trail.jsonl").write_text("")
    mandate = {
        "constraints": {
            "rebalance": "weekly",
            "max_adv_participation": 0.05,
            "max_weekly_turnover": 2.0,
        }
    }
    info = promotion.promote(
        versions,
        candidate,
        "Repair daily_momentum: weekly",
        {"mandate": mandate, "run_dir": str(run_dir)},
        "paper",
        "daily_momentum",
        (OPENED, SESSIONS),
    )
    return {
        "settings": settings,
        "ledger": ledger,
        "versions": versions,
        "v2": info,
        "run_dir": run_dir,
        "v1": versions.resolve("v1"),
    }
