"""pytest plugin of the offline Test Author: which existing tests watch the strategy do what a
mandate forbids.

It is loaded (`-p oomrl_mandate_probe`) into a jailed run of the workspace's own tests. They run
against the unchanged source S (guardrails' run_suite; S in its strategy host). It watches the test
process's side of the host's calling convention (`strategy_host.HostedStrategy`). That shows what
the mandated strategy answered inside each test. Per test, it writes the answers that break the
mandate's constraints. A test that asserts such an answer pins forbidden behaviour. It never fails
a test: it only watches. It imports nothing of oomrl: the jail holds only the client and the
strategy API. Its config is the JSON file next to it.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from strategy_api.periods import period_key

CONFIG: dict[str, Any] = {}
FOUND: dict[str, list[str]] = {}
CURRENT: list[str] = []
ADV_WINDOW = 20
SLACK = 1e-9


def _note(text: str) -> None:
    if CURRENT:
        FOUND.setdefault(CURRENT[-1], []).append(text)


def schedule_breaches(day: Any, last: Any, due: bool, constraints: dict[str, Any]) -> list[str]:
    """A second trade in one mandated period."""
    import pandas as pd

    rebalance = constraints.get("rebalance")
    if not due or last is None or rebalance in (None, "daily") or day == last:
        return []
    if period_key(pd.Timestamp(day), rebalance) != period_key(pd.Timestamp(last), rebalance):
        return []
    return [f"rebalance: due on {day} after trading on {last}, in the same {rebalance} period"]


def traded_value(panels: Any, as_of: Any) -> dict[str, float]:
    """Average daily traded value over the last ADV_WINDOW sessions up to as_of.

    Traded value is the amount, else close x volume."""
    import pandas as pd

    close = panels["close"]
    rows = int(
        pd.DatetimeIndex(close.index).searchsorted(
            pd.Timestamp(as_of) if as_of is not None else close.index[-1], side="right"
        )
    )
    tail = {f: p.iloc[max(rows - ADV_WINDOW, 0) : rows] for f, p in panels.items()}
    if "volume" not in tail:
        return {}
    value = tail["close"] * tail["volume"]
    if "amount" in tail:
        value = tail["amount"].fillna(value)
    return {str(k): float(v) for k, v in value.mean(axis=0, skipna=True).items()}


def weight_breaches(
    adv: dict[str, float],
    value: float,
    holdings: dict[str, float],
    target: dict[str, float],
    constraints: dict[str, Any],
) -> list[str]:
    """Turnover over the weekly budget, or a trade over the ADV cap at the given capital."""
    found = []
    names = set(target) | set(holdings)
    change = {s: float(target.get(s, 0.0)) - float(holdings.get(s, 0.0)) for s in names}
    budget = constraints.get("max_weekly_turnover")
    turnover = sum(abs(v) for v in change.values())
    if budget is not None and turnover > budget + SLACK:
        found.append(f"max_weekly_turnover: one call traded {turnover:.4f} (budget {budget})")
    cap = constraints.get("max_adv_participation")
    if cap is not None:
        for symbol, delta in sorted(change.items()):
            daily = adv.get(symbol, math.nan)
            if delta and math.isfinite(daily) and abs(delta) * value > cap * daily * (1 + SLACK):
                found.append(
                    f"max_adv_participation: {symbol} traded {abs(delta) * value:.0f} "
                    f"against an ADV of {daily:.0f} (cap {cap})"
                )
    return found


def _watch(cls: type, name: str, constraints: dict[str, Any]) -> None:
    due: Callable[..., bool] = cls.rebalance_due  # type: ignore[attr-defined]
    weights: Callable[..., dict[str, float]] = cls.target_weights  # type: ignore[attr-defined]

    def watched_due(self: Any, day: Any, last: Any) -> bool:
        answer = due(self, day, last)
        if self.name == name:
            with contextlib.suppress(Exception):  # the probe only watches; it never fails a test
                for text in schedule_breaches(day, last, bool(answer), constraints):
                    _note(text)
        return answer

    def watched_weights(
        self: Any,
        panels: Any,
        as_of: Any = None,
        holdings: Any = None,
        portfolio_value: float = 1.0,
        members: Any = None,
    ) -> dict[str, float]:
        answer = weights(self, panels, as_of, holdings, portfolio_value, members)
        if self.name == name:
            adv: dict[str, float] = {}
            with contextlib.suppress(Exception):  # panels it cannot read: turnover is still watched
                adv = traded_value(panels, as_of)
            with contextlib.suppress(Exception):
                for text in weight_breaches(
                    adv, float(portfolio_value), dict(holdings or {}), dict(answer), constraints
                ):
                    _note(text)
        return answer

    cls.rebalance_due = watched_due  # type: ignore[attr-defined]
    cls.target_weights = watched_weights  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    CONFIG.update(json.loads(Path(__file__).with_suffix(".json").read_text(encoding="utf-8")))
    import strategy_host

    _watch(strategy_host.HostedStrategy, str(CONFIG["strategy"]), CONFIG.get("constraints") or {})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    CURRENT.append(item.nodeid)
    try:
        yield
    finally:
        CURRENT.pop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if CONFIG.get("report"):
        with open(CONFIG["report"], "w", encoding="utf-8") as handle:
            json.dump(FOUND, handle)
