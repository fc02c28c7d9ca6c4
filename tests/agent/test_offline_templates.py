"""The offline Coder's generated trading limiter: caps per name and per week, and never levers
up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import pytest

from oomrl.agent.offline_common import template


class _View:
    """Just what the limiter reads: recent traded value per symbol and the portfolio value."""

    def __init__(self, adv: Mapping[str, float], portfolio_value: float) -> None:
        self.adv, self.portfolio_value = dict(adv), portfolio_value

    def traded_value(self, window: int) -> pd.Series:
        return pd.Series(self.adv, dtype=float)


class _Params:
    adv_window = 20
    max_adv_participation = 0.05
    max_weekly_turnover = 0.3


def _limiter() -> Any:
    namespace: dict[str, Any] = {
        "pd": pd,
        "Mapping": Mapping,
        "MarketView": _View,
        "Params": _Params,
    }
    exec(template("coder_limit_trading.py.txt", params_class="Params"), namespace)  # noqa: S102 - our template
    return namespace["_limit_trading"]


def test_held_back_sells_do_not_lever_the_book_up() -> None:
    # B is illiquid (its sale is capped at 0.05) while A is liquid; the turnover budget then scales
    # both legs by 0.3 / 1.05, and without the trim the book would sum to 1.22.
    view = _View({"A": 1e9, "B": 1e6}, portfolio_value=1e6)
    target = _limiter()({"A": 1.0}, {"B": 0.95}, view, _Params())
    assert sum(target.values()) == pytest.approx(1.0)
    assert target["B"] == pytest.approx(0.95 - 0.05 * 0.3 / 1.05)  # sold only what the caps allow
    assert target["A"] == pytest.approx(1.0 - target["B"])  # bought only what the freed cash allows


def test_turnover_budget_and_adv_cap_hold_when_cash_is_free() -> None:
    view = _View({"A": 1e9, "B": 1e9}, portfolio_value=1e6)
    target = _limiter()({"A": 0.5, "B": 0.5}, {}, view, _Params())
    assert sum(target.values()) == pytest.approx(0.3)  # the whole weekly budget, split evenly
    assert target["A"] == pytest.approx(0.15) and target["B"] == pytest.approx(0.15)
