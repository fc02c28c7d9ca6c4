"""No memory across decisions: a sample of a replay's decisions recomputed, each in a fresh host.

A decision may depend only on the market up to its date, its book and its given members. It may not
depend on how many calls came before, nor on anything an earlier decision left behind. Decisions a
runner recorded (HostedRunner with `record=True`) are asked again. Each of a sample goes to a new
host. That host holds rows up to the decision date only. It must come back with exactly the same
weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

from oomrl.errors import OomrlError
from oomrl.portfolio.hosting import Decision, WorkspaceStrategy
from oomrl.portfolio.market import MarketFrames

FRESH_DECISIONS = 10  # decisions recomputed per check, evenly spread (all when there are fewer)


@dataclass(frozen=True)
class Difference:
    """A recomputed decision that did not match: its decision date and what differed."""

    day: date
    symbols: list[str]  # symbols whose weight changed
    error: str | None = None  # the fresh host failed instead of answering

    def describe(self) -> str:
        """`2024-07-03: 600519.SH, 000001.SZ` or `2024-07-03: <the error>`."""
        shown = ", ".join(self.symbols[:5]) + (
            f" (+{len(self.symbols) - 5} more)" if len(self.symbols) > 5 else ""
        )
        return f"{self.day}: {self.error if self.error is not None else shown}"


@dataclass(frozen=True)
class Recomputed:
    """How many decisions were recomputed in fresh hosts, of how many, and which differed."""

    checked: list[date]
    total: int
    differences: list[Difference]


def evenly_spread(total: int, count: int = FRESH_DECISIONS) -> list[int]:
    """Indices of `count` items evenly spread over `total`, first and last included.

    All of them when fewer."""
    if total <= count:
        return list(range(total))
    return [int(i) for i in np.linspace(0, total - 1, count).round()]


def recompute_fresh(
    source: WorkspaceStrategy,
    params: Mapping[str, Any] | None,
    market: MarketFrames,
    decisions: Sequence[Decision],
    count: int = FRESH_DECISIONS,
) -> Recomputed:
    """Ask a sample of `decisions` again, each in a new host. Name those whose weights differ.

    A fresh host that fails (S raises, or the host breaks) is a difference too, never an exception.
    """
    chosen = [decisions[i] for i in evenly_spread(len(decisions), count)]
    differences = []
    for decision in chosen:
        day = market.days[decision.t - 1]
        try:
            again = decide_fresh(source, params, market, decision)
        except OomrlError as exc:
            differences.append(Difference(day, [], str(exc)))
            continue
        changed = np.flatnonzero(again != decision.weights)
        if len(changed):
            differences.append(Difference(day, [str(market.symbols[i]) for i in changed]))
    return Recomputed([market.days[d.t - 1] for d in chosen], len(decisions), differences)


def decide_fresh(
    source: WorkspaceStrategy,
    params: Mapping[str, Any] | None,
    market: MarketFrames,
    decision: Decision,
) -> np.ndarray:
    """The weights a new host gives for `decision`, having seen nothing but rows up to its date."""
    runner = source.open(params, market, schedule_ahead=False)
    try:
        return runner.weights(
            decision.t, decision.held, decision.held_weights, decision.nav, decision.members
        )
    finally:
        runner.close()
