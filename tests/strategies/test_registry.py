"""The registry finds each strategy by name and names the known ones on a miss (called through the
host)."""

from __future__ import annotations

import pytest

from strategy_host import call, open_strategy


def test_every_strategy_is_registered_under_its_own_name() -> None:
    names = call("strategies.registry:names")
    assert names == ["daily_momentum", "weekly_liquidity"]
    for name in names:
        strategy = open_strategy(name)
        assert strategy.name == name
        assert strategy.params  # defaults are valid


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="daily_momentum, weekly_liquidity"):
        call("strategies.registry:get", "nope")
