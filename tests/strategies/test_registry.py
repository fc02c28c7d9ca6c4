"""The registry finds each strategy by name and names the known ones on a miss."""

from __future__ import annotations

import pytest

from strategies import registry


def test_every_strategy_is_registered_under_its_own_name() -> None:
    assert registry.names() == ["daily_momentum", "weekly_liquidity"]
    for name in registry.names():
        strategy = registry.get(name)
        assert strategy.name == name
        assert strategy.Params().model_dump()  # defaults are valid


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="daily_momentum, weekly_liquidity"):
        registry.get("nope")
