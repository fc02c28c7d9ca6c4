"""The Strategy protocol every strategy module's STRATEGY meets, and the base of its parameters."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import TYPE_CHECKING, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from strategy_api.view import MarketView


class StrategyParams(BaseModel):
    """Base of every strategy's parameters: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Strategy(Protocol):
    """What every strategy offers: a name, a Params model, a schedule and target weights."""

    name: ClassVar[str]
    Params: ClassVar[type[StrategyParams]]

    def rebalance_due(self, day: date, last_rebalance: date | None) -> bool:
        """True when the strategy wants to trade on session `day`."""

    def target_weights(
        self, view: MarketView, holdings: Mapping[str, float], params: StrategyParams
    ) -> dict[str, float]:
        """Long-only target weights (each >= 0, sum <= 1) from data up to `view.as_of`."""
