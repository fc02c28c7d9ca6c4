"""The strategies by name: a static table (no dynamic imports, so the gate's sanitizer is satisfied)."""

from __future__ import annotations

from strategy_api import Strategy

from . import daily_momentum, weekly_liquidity

_STRATEGIES: dict[str, Strategy] = {
    daily_momentum.STRATEGY.name: daily_momentum.STRATEGY,
    weekly_liquidity.STRATEGY.name: weekly_liquidity.STRATEGY,
}


def names() -> list[str]:
    """Names of every registered strategy, sorted."""
    return sorted(_STRATEGIES)


def get(name: str) -> Strategy:
    """The strategy registered under `name`; KeyError naming the known ones otherwise."""
    if name not in _STRATEGIES:
        raise KeyError(f"unknown strategy {name!r}; known: {', '.join(names())}")
    return _STRATEGIES[name]
