"""pytest plugin of the offline Test Author: which existing tests watch the strategy do what a mandate forbids.

Loaded (`-p oomrl_mandate_probe`) into a run of the workspace's own tests against the unchanged
source S. It records what the mandated strategy answered inside each test and writes, per test, the
answers that break the mandate's constraints: a test that asserts such an answer pins forbidden
behaviour. It never fails a test: it only watches.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# From oomrl.periods, not crossval: this plugin runs inside workspace tests and must not load the replay engine.
from oomrl.periods import period_key

CONFIG: dict[str, Any] = json.loads(os.environ.get("OOMRL_MANDATE_PROBE", "{}"))
FOUND: dict[str, list[str]] = {}
CURRENT: list[str] = []
ADV_WINDOW = 20
SLACK = 1e-9


def _note(text: str) -> None:
    if CURRENT:
        FOUND.setdefault(CURRENT[-1], []).append(text)


def schedule_breaches(day: Any, last: Any, due: bool, constraints: dict[str, Any]) -> list[str]:
    """A second trade in one mandated period."""
    rebalance = constraints.get("rebalance")
    if not due or last is None or rebalance in (None, "daily") or day == last:
        return []
    if period_key(day, rebalance) != period_key(last, rebalance):
        return []
    return [f"rebalance: due on {day} after trading on {last}, in the same {rebalance} period"]


def weight_breaches(view: Any, holdings: dict[str, float], target: dict[str, float],
                    constraints: dict[str, Any]) -> list[str]:
    """Turnover over the weekly budget, or a trade over the ADV cap at the view's capital."""
    found = []
    names = set(target) | set(holdings)
    change = {s: float(target.get(s, 0.0)) - float(holdings.get(s, 0.0)) for s in names}
    budget = constraints.get("max_weekly_turnover")
    turnover = sum(abs(v) for v in change.values())
    if budget is not None and turnover > budget + SLACK:
        found.append(f"max_weekly_turnover: one call traded {turnover:.4f} (budget {budget})")
    cap = constraints.get("max_adv_participation")
    if cap is not None and hasattr(view, "traded_value"):
        adv = view.traded_value(ADV_WINDOW)
        value = float(getattr(view, "portfolio_value", 1.0))
        for symbol, delta in sorted(change.items()):
            daily = float(adv.get(symbol, math.nan)) if hasattr(adv, "get") else math.nan
            if delta and math.isfinite(daily) and abs(delta) * value > cap * daily * (1 + SLACK):
                found.append(f"max_adv_participation: {symbol} traded {abs(delta) * value:.0f} "
                             f"against an ADV of {daily:.0f} (cap {cap})")
    return found


def _watch(cls: type, constraints: dict[str, Any]) -> None:
    due: Callable[..., bool] = cls.rebalance_due  # type: ignore[attr-defined]
    weights: Callable[..., dict[str, float]] = cls.target_weights  # type: ignore[attr-defined]

    def watched_due(self: Any, day: Any, last: Any) -> bool:
        answer = due(self, day, last)
        with contextlib.suppress(Exception):  # the probe only watches; it never fails a test
            for text in schedule_breaches(day, last, bool(answer), constraints):
                _note(text)
        return answer

    def watched_weights(self: Any, view: Any, holdings: Any, params: Any) -> dict[str, float]:
        answer = weights(self, view, holdings, params)
        with contextlib.suppress(Exception):
            for text in weight_breaches(view, dict(holdings), dict(answer), constraints):
                _note(text)
        return answer

    cls.rebalance_due = watched_due  # type: ignore[attr-defined]
    cls.target_weights = watched_weights  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    if not CONFIG:
        return
    module = importlib.import_module(CONFIG["module"])
    _watch(type(module.STRATEGY), CONFIG.get("constraints") or {})


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
