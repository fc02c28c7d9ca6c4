"""Strategies load from any workspace directory without touching the main `strategies` package."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import strategies.base
from oomrl.portfolio.loader import StrategyLoadError, load_strategy

REPO = Path(__file__).resolve().parents[2]


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(REPO / "strategies", root / "strategies",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_loads_in_isolation_with_relative_and_absolute_imports(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    weekly = root / "strategies" / "weekly_liquidity.py"
    weekly.write_text(weekly.read_text().replace("from .base import", "from strategies.base import")
                      .replace('min_adv: float = Field(2e8', 'min_adv: float = Field(3e8'))
    before = {k: v for k, v in sys.modules.items() if k.startswith("strategies")}
    loaded = load_strategy(root, "weekly_liquidity")
    assert {k: v for k, v in sys.modules.items() if k.startswith("strategies")} == before
    assert loaded.strategy.Params().min_adv == 3e8  # the workspace's code, not the main one
    assert loaded.view_class is not strategies.base.MarketView
    assert loaded.view_class.__module__ == f"{loaded.package.__name__}.base"
    module = sys.modules[type(loaded.strategy).__module__]
    assert module.MarketView is loaded.view_class  # absolute import resolved into the workspace
    other = load_strategy(root, "daily_momentum")
    assert other.package.__name__ != loaded.package.__name__


def test_missing_or_broken_strategies_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StrategyLoadError, match="no strategies/ package"):
        load_strategy(tmp_path, "daily_momentum")
    root = workspace(tmp_path)
    with pytest.raises(StrategyLoadError, match="no strategy module"):
        load_strategy(root, "nope")
    (root / "strategies" / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(StrategyLoadError, match="boom"):
        load_strategy(root, "broken")
    (root / "strategies" / "unnamed.py").write_text("STRATEGY = None\n")
    with pytest.raises(StrategyLoadError, match="must define STRATEGY"):
        load_strategy(root, "unnamed")
    assert not any(k.startswith("_oomrl_ws_") and "broken" in k for k in sys.modules)
