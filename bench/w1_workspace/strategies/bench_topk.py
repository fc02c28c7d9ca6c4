"""W1 (docs/bench.md): every fifth session from the 27th, equal weight on the top K by 20-session
change."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import ClassVar

from pydantic import Field

from strategy_api import MarketView, StrategyParams, equal_weights, momentum, top_k

LOOKBACK = 20
FIRST_SESSION = date(2010, 1, 1)  # W1's first session (a business day, a Friday)
# Business-day indices it trades on: 26, 31, 36, ... (decided the day before)
FIRST_TRADE, EVERY = (26, 5)


class BenchTopKParams(StrategyParams):
    """How many names to hold (W1's K for its N)."""

    k: int = Field(50, ge=1)


class BenchTopK:
    """W1's signal: decides on session d (data up to d), trades on d + 1."""

    name: ClassVar[str] = "bench_topk"
    Params: ClassVar[type[BenchTopKParams]] = BenchTopKParams

    def rebalance_due(self, day: date, last_rebalance: date | None) -> bool:
        """From the date alone: its business-day index since FIRST_SESSION is 26, 31, 36, ..."""
        index = business_days(FIRST_SESSION, day)
        return index >= FIRST_TRADE and (index - FIRST_TRADE) % EVERY == 0

    def target_weights(
        self, view: MarketView, holdings: Mapping[str, float], params: BenchTopKParams
    ) -> dict[str, float]:
        """Equal weight on the K highest 20-session changes."""
        return equal_weights(top_k(momentum(view, LOOKBACK), params.k), 1.0)


def business_days(start: date, day: date) -> int:
    """Weekdays in [start, day) (numpy.busday_count's answer, in integer arithmetic)."""
    weeks, rest = divmod(day.toordinal() - start.toordinal(), 7)
    first = start.weekday()
    return weeks * 5 + sum(1 for i in range(rest) if (first + i) % 7 < 5)


STRATEGY = BenchTopK()
