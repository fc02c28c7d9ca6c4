"""Momentum: equal weight on the top-K names by lookback return among today's traded names."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import ClassVar

import numpy as np
from pydantic import Field

from strategy_api import MarketView, StrategyParams, equal_weights, momentum, top_k


class MomentumParams(StrategyParams):
    """How many names and how far back."""

    top_k: int = Field(2, ge=1)
    lookback: int = Field(3, ge=1)


class Momentum:
    """Buys the strongest recent movers, every session."""

    name: ClassVar[str] = "momentum"
    Params: ClassVar[type[MomentumParams]] = MomentumParams

    def rebalance_due(self, day: date, last_rebalance: date | None) -> bool:
        """Every new session."""
        return last_rebalance is None or day > last_rebalance

    def target_weights(self, view: MarketView, holdings: Mapping[str, float],
                       params: MomentumParams) -> dict[str, float]:
        """Equal weight on the top-K traded names by `lookback`-session return."""
        scores = momentum(view, params.lookback)
        scores = scores[np.isfinite(scores.to_numpy())]
        return equal_weights(sorted(top_k(scores, params.top_k, among=view.universe())), 1.0)


STRATEGY = Momentum()
