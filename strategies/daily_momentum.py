"""Phase-1 baseline: every session, buy the top-K names by short-horizon momentum (no liquidity checks)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import ClassVar

from pydantic import Field

from strategy_api import MarketView, StrategyParams, equal_weights, momentum, top_k


class DailyMomentumParams(StrategyParams):
    """Knobs of the baseline: how many names, how far back, how much of the book to invest."""

    top_k: int = Field(10, ge=1)
    lookback: int = Field(5, ge=1)
    gross_exposure: float = Field(0.98, gt=0.0, le=1.0)


class DailyMomentum:
    """Chases the strongest recent movers and re-sorts the whole book every day."""

    name: ClassVar[str] = "daily_momentum"
    Params: ClassVar[type[DailyMomentumParams]] = DailyMomentumParams

    def rebalance_due(self, day: date, last_rebalance: date | None) -> bool:
        """Trades on every session it is asked about."""
        return last_rebalance is None or day > last_rebalance

    def target_weights(self, view: MarketView, holdings: Mapping[str, float],
                       params: StrategyParams) -> dict[str, float]:
        """Equal weight on the top-K symbols by `lookback`-day return among today's traded names."""
        picks = top_k(momentum(view, params.lookback), params.top_k, among=view.universe())
        return equal_weights(sorted(picks), params.gross_exposure)


STRATEGY = DailyMomentum()
