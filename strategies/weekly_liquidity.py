"""The mature design: weekly, liquid names only, trades capped by ADV participation and a turnover budget."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from strategy_api import MarketView, StrategyParams, equal_weights, iso_week, momentum

# Targets use 97 % of each cap: prices move between the decision close and the fill, and the
# realized turnover and ADV participation must still meet the mandate.
FILL_SLACK = 0.97


class WeeklyLiquidityParams(StrategyParams):
    """Knobs of the mature strategy; the last two are the mandate's machine-checkable constraints."""

    top_k: int = Field(30, ge=1)
    lookback: int = Field(60, ge=1)
    skip: int = Field(5, ge=0)
    adv_window: int = Field(20, ge=1)
    min_adv: float = Field(2e8, ge=0.0)
    gross_exposure: float = Field(0.95, gt=0.0, le=1.0)
    max_adv_participation: float = Field(0.05, gt=0.0, le=1.0)
    max_weekly_turnover: float = Field(0.3, gt=0.0, le=2.0)


class WeeklyLiquidity:
    """Medium-horizon momentum among liquid names, traded gently once a week."""

    name: ClassVar[str] = "weekly_liquidity"
    Params: ClassVar[type[WeeklyLiquidityParams]] = WeeklyLiquidityParams

    def rebalance_due(self, day: date, last_rebalance: date | None) -> bool:
        """Trades on the first session it sees in each ISO week."""
        return last_rebalance is None or iso_week(day) != iso_week(last_rebalance)

    def target_weights(self, view: MarketView, holdings: Mapping[str, float],
                       params: StrategyParams) -> dict[str, float]:
        """Momentum top-K among liquid names, then ADV-capped, then scaled to the turnover budget."""
        adv = view.traded_value(params.adv_window).reindex(view.universe())
        liquid = adv[adv >= params.min_adv].index
        scores = momentum(view, params.lookback, params.skip).reindex(liquid).dropna()
        picks = sorted(scores.sort_values(ascending=False, kind="mergesort").index[: params.top_k])
        ideal = pd.Series(equal_weights(picks, params.gross_exposure), dtype=float)
        current = pd.Series(dict(holdings), dtype=float)
        symbols = ideal.index.union(current.index)
        current = current.reindex(symbols, fill_value=0.0)
        change = ideal.reindex(symbols, fill_value=0.0) - current
        change = _cap_participation(change, adv.reindex(symbols), view.portfolio_value,
                                    params.max_adv_participation * FILL_SLACK)
        change = _fit_exposure(change, current, params.gross_exposure)
        traded = float(change.abs().sum())
        budget = params.max_weekly_turnover * FILL_SLACK
        if traded > budget:
            change = change * (budget / traded)
        target = np.maximum(current.to_numpy() + change.to_numpy(), 0.0)
        return {symbol: float(weight) for symbol, weight in zip(symbols, target, strict=True) if weight > 0.0}


def _cap_participation(change: pd.Series, adv: pd.Series, portfolio_value: float,
                       max_participation: float) -> pd.Series:
    """Clip each weight change so its traded value stays within max_participation x ADV."""
    # A name with unknown ADV (no recent trading) is frozen: no trade is the safe reading.
    limit = np.maximum(np.nan_to_num(adv.to_numpy(dtype=float), nan=0.0) * max_participation
                       / max(portfolio_value, 1.0), 0.0)
    return pd.Series(np.clip(change.to_numpy(), -limit, limit), index=change.index)


def _fit_exposure(change: pd.Series, current: pd.Series, gross: float) -> pd.Series:
    """Shrink the buys so that what stays held after capped or frozen sells plus the buys <= gross."""
    buys = np.maximum(change.to_numpy(), 0.0)
    sells = np.minimum(change.to_numpy(), 0.0)
    room = max(gross - float((current.to_numpy() + sells).sum()), 0.0)
    bought = float(buys.sum())
    if bought > room:
        buys = buys * (room / bought)
    return pd.Series(buys + sells, index=change.index)


STRATEGY = WeeklyLiquidity()
