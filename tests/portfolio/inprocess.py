"""InProcessStrategy: the engine's runner seam served in the test process, for the engine's own unit
tests.

Production never runs strategy code in process: every replay, rebalance, cross-validation and demo
opens its strategy in a jailed strategy host (oomrl.portfolio.hosting.WorkspaceStrategy). The
engine's unit tests exercise the broker, the ledger and the replay loop with this repository's own
trusted strategies (or a test's own strategy object), without starting a host for each tiny case.
The runner does what the host does, step for step: it appends the market's rows to a
`strategy_api.History` only up to each decision date (session t-1 when deciding t), builds the view
with `History.view(nav, members)`, turns the answer into symbol positions and floats, and checks it
with the engine's own `weights_array`, so the engine sees exactly what a host answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

import numpy as np

from oomrl.portfolio.hosting import weights_array
from oomrl.portfolio.market import MarketFrames
from strategy_api import History

IN_PROCESS = "none (tests/portfolio/inprocess.py: a test's strategy in the test process)"


class InProcessStrategy:
    """A StrategySource over a strategy object (e.g. `strategies.registry.get(name)`) in this
    process."""

    def __init__(self, strategy: Any) -> None:
        self.strategy = strategy
        self.name: str = strategy.name

    @classmethod
    def bundled(cls, name: str) -> InProcessStrategy:
        """This repository's strategy `name` (strategies/<name>.py, trusted here)."""
        from strategies import registry

        return cls(registry.get(name))

    def open(self, params: Mapping[str, Any] | None, market: MarketFrames) -> InProcessRunner:
        return InProcessRunner(self.strategy, self.strategy.Params(**dict(params or {})), market)


class InProcessRunner:
    """A StrategyRunner feeding its strategy rows up to each decision date, as a host does."""

    jail = IN_PROCESS

    def __init__(self, strategy: Any, params: Any, market: MarketFrames) -> None:
        self.strategy, self.params, self.market = strategy, params, market
        self.name: str = strategy.name
        self.history = History(
            market.symbols, list(market.panels.arrays), capacity=len(market.days)
        )

    def due(self, t: int, last: date | None) -> bool:
        return bool(self.strategy.rebalance_due(self.market.days[t], last))

    def weights(
        self,
        t: int,
        held: np.ndarray,
        held_weights: np.ndarray,
        nav: float,
        members: list[str] | None,
    ) -> np.ndarray:
        self._append(t)
        history = self.history
        view = history.view(float(nav), members)
        holdings = dict(zip(history.names[held].tolist(), held_weights.tolist(), strict=True))
        items = list(self.strategy.target_weights(view, holdings, self.params).items())
        idx = np.array([history.positions.get(symbol, -1) for symbol, _ in items], dtype="<i8")
        values = np.array([float(weight) for _, weight in items], dtype="<f8")
        unknown = [symbol for (symbol, _), i in zip(items, idx.tolist(), strict=True) if i < 0]
        return weights_array(self.name, self.market.days[t - 1], self.market, idx, values, unknown)

    def _append(self, stop: int) -> None:
        """Rows [rows, stop): the sessions up to the decision date t-1, never one after it."""
        start = self.history.rows
        if stop < start:
            raise ValueError(
                f"decisions go forward: rows up to {start} are appended, asked for {stop}"
            )
        if stop > start:
            self.history.append(
                self.market.dates.values[start:stop],
                {f: a[start:stop] for f, a in self.market.panels.arrays.items()},
            )

    def close(self) -> None:
        """Nothing to stop: no host was started."""
