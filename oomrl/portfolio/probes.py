"""Memorization probes: a replay's decisions asked again on markets a generic strategy cannot tell
apart.

A strategy that reads the market decides from prices, volumes, its book and the members it is
given. It cannot know which real stock a symbol is, nor which real date a session is. So its
decisions follow two transforms of the market it was replayed on.
- relabelled: symbols permuted at random within each board family (exchange and board). So price
  limits and lot rules stay the same. The weights must follow the permutation.
- shifted: every session date moved by a whole number of weeks (weekdays and ISO-week boundaries
  kept). A strategy that declares a monthly calendar (`calendar = "monthly"`) is moved by months.
  The schedule and the weights must be the same.
A strategy holding a table of names per date changes its decisions. Such a table is recall of
2024-2025, not skill. Each recorded decision is asked again with the same book and members
(translated). Each probe runs in one host. Only the strategy fields a host sees are transformed.
Weights are compared per symbol within `TOLERANCE`. A permutation changes the order of float sums,
never more than that. Names whose scores tie exactly could swap places; real prices make that rare.
Such a difference is reported like any other: the probe errs on the side of refusing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import pandas as pd

from oomrl.errors import OomrlError
from oomrl.market.boards import board_of
from oomrl.portfolio.hosting import Decision, WorkspaceStrategy
from oomrl.portfolio.market import MarketFrames, Panels
from oomrl.portfolio.recompute import Difference

MEMORIZED = "crossval.memorized"
# Weight difference that is float rounding (sums in another order), not another decision
TOLERANCE = 1e-9
# A monthly shift is a multiple of 4 years. Month lengths, leap days and month ends are kept.
MONTHS = 48


@dataclass(frozen=True)
class Probe:
    """A transformed market as a host sees it. Its column j holds the original column
    `source[j]`."""

    name: str
    market: MarketFrames
    source: np.ndarray

    def relabel(self, positions: np.ndarray) -> np.ndarray:
        """The probe's columns of original columns."""
        inverse = np.empty_like(self.source)
        inverse[self.source] = np.arange(len(self.source))
        return inverse[np.asarray(positions, dtype=np.int64)]


@dataclass(frozen=True)
class ProbeResult:
    """What one probe found: its description, the decisions asked again, and those that changed."""

    name: str
    checked: int
    differences: list[Difference]


def seed_of(digest: str) -> int:
    """The probes' seed for a version's code (`WorkspaceStrategy.digest`).

    The same code meets the same probes. A patch cannot know its probes before it is written."""
    return int.from_bytes(hashlib.sha256(digest.encode()).digest()[:8], "big")


def family(symbol: str) -> tuple[str, str]:
    """A symbol's board family: its exchange suffix and board (a relabelling keeps both)."""
    return symbol.rsplit(".", 1)[-1] if "." in symbol else "", board_of(symbol).value


def transformed(
    market: MarketFrames, name: str, source: np.ndarray, dates: pd.DatetimeIndex
) -> Probe:
    """The market as a host sees it, columns taken from `source` and sessions on `dates`."""
    frames = {
        field: pd.DataFrame(frame.to_numpy()[:, source], index=dates, columns=market.symbols)
        for field, frame in market.panels.items()
    }
    return Probe(name, replace(market, dates=dates, panels=Panels(frames)), source)


def relabelled(market: MarketFrames, seed: int) -> Probe:
    """Symbols permuted at random within each board family."""
    rng = np.random.default_rng(seed)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, symbol in enumerate(market.symbols):
        groups.setdefault(family(str(symbol)), []).append(i)
    source = np.arange(len(market.symbols))
    for members in groups.values():
        source[members] = rng.permutation(members)
    return transformed(
        market, "symbols relabelled at random within each board", source, market.dates
    )


def shifted(market: MarketFrames, seed: int, calendar: str = "weekly") -> Probe:
    """Session dates moved back by a random whole number of weeks (1-5 years).

    Or by a random number of 4-year spans of months."""
    rng = np.random.default_rng(seed)
    if calendar == "monthly":
        months = MONTHS * int(rng.integers(1, 3))
        dates = pd.DatetimeIndex([d - pd.DateOffset(months=months) for d in market.dates])
        how = f"{months} months"
    else:
        weeks = int(rng.integers(53, 261))
        dates = market.dates - pd.Timedelta(weeks=weeks)
        how = f"{weeks} weeks"
    return transformed(
        market, f"dates shifted back by {how}", np.arange(len(market.symbols)), dates
    )


def probe(
    source: WorkspaceStrategy,
    params: Mapping[str, object] | None,
    market: MarketFrames,
    decisions: Sequence[Decision],
    first: int,
    the_probe: Probe,
) -> ProbeResult:
    """Ask `decisions[first:]` again on the probe's market in one host. Name those that differ.

    A decision differs when its schedule or weights differ. The decision before `first` is where
    the schedule starts from. A host that fails on the probe is a difference too, never an
    exception.
    """
    differences: list[Difference] = []
    runner = source.open(params, the_probe.market, schedule_ahead=False)
    try:
        days = the_probe.market.days
        previous = decisions[first - 1].t if first > 0 else None
        for decision in decisions[first:]:
            day = market.days[decision.t - 1]
            try:
                early = _schedule_differs(runner, decision.t, previous, days)
                if early is not None:
                    differences.append(
                        Difference(
                            day,
                            [],
                            f"the schedule trades on {market.days[early]} "
                            f"instead of {market.days[decision.t]}",
                        )
                    )
                weights = runner.weights(
                    decision.t,
                    the_probe.relabel(decision.held),
                    decision.held_weights,
                    decision.nav,
                    _members(decision.members, market, the_probe),
                )
            except OomrlError as exc:
                differences.append(Difference(day, [], str(exc)))
                break  # the host may be gone: later decisions cannot be asked
            previous = decision.t
            back = np.empty_like(weights)
            back[the_probe.source] = weights
            changed = np.flatnonzero(np.abs(back - decision.weights) > TOLERANCE)
            if len(changed):
                differences.append(Difference(day, [str(market.symbols[i]) for i in changed]))
    finally:
        runner.close()
    return ProbeResult(the_probe.name, len(decisions) - first, differences)


def _schedule_differs(runner: object, t: int, previous: int | None, days: list[date]) -> int | None:
    """The first session in (previous, t) the probe's schedule calls due.

    Or t itself when it does not call t due; None when it agrees. Without a previous decision only
    t is asked."""
    due = runner.due  # type: ignore[attr-defined]
    last = None if previous is None else days[previous]
    for s in range(t if previous is None else previous + 1, t):
        if due(s, last):
            return s
    return None if due(t, last) else t


def _members(members: list[str] | None, market: MarketFrames, the_probe: Probe) -> list[str] | None:
    """The members as the probe's labels.

    A member without market data keeps its name: it has no column."""
    if members is None:
        return None
    positions = market.positions
    known = [s for s in members if s in positions]
    labels = the_probe.relabel(np.array([positions[s] for s in known], dtype=np.int64))
    return [str(market.symbols[j]) for j in labels] + [s for s in members if s not in positions]


def run_probes(
    source: WorkspaceStrategy,
    params: Mapping[str, object] | None,
    market: MarketFrames,
    decisions: Sequence[Decision],
    since: date,
    calendar: str = "weekly",
    seed: int = 0,
) -> list[ProbeResult]:
    """Both probes over the decisions taken on sessions from `since` on.

    First the relabelling, then the shift by the declared calendar. Both are transformed with
    `seed` (`seed_of(source.digest())`)."""
    first = next((i for i, d in enumerate(decisions) if market.days[d.t] >= since), len(decisions))
    return [
        probe(source, params, market, decisions, first, relabelled(market, seed)),
        probe(source, params, market, decisions, first, shifted(market, seed, calendar)),
    ]
