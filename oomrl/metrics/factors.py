"""Style attribution (the paper's Table 2): High-Low style factors and a market + style regression.

Factors are built over the stock universe, date × symbol panels:
- Liquidity: log traded value (CNY) of the day. Momentum: 20-session return. Volatility:
  20-session standard deviation (ddof=1) of daily returns.
- Each characteristic is lagged one session (known at the previous close). The factor return on
  day t is the top quintile's equal-weighted mean return minus the bottom quintile's.
- (r − rf) is regressed on (b − rf) and the factors. The annual return then splits exactly (in
  sample) into risk-free + beta return + style return + pure idiosyncratic alpha. That is because
  OLS residuals with an intercept average to zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from oomrl.errors import MetricsInputError
from oomrl.metrics.io import align
from oomrl.metrics.performance import PERIODS_PER_YEAR, annualized_return, tracking_error
from oomrl.metrics.regression import RegressionResult, ols

FACTOR_NAMES: tuple[str, ...] = ("liquidity", "momentum", "volatility")
LOOKBACK = 20
QUINTILE = 0.2
MIN_STOCKS = 10  # fewer ranked stocks than this on a day gives no factor return that day


def traded_value(
    close: pd.DataFrame, volume: pd.DataFrame, amount: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Traded value in CNY: the reported amount where known, else close × volume.

    The latter is an approximation on forward-adjusted prices, good enough for a cross-sectional
    rank."""
    estimate = close * volume
    return estimate if amount is None else amount.reindex_like(estimate).fillna(estimate)


def characteristics(close: pd.DataFrame, value_traded: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The unlagged stock characteristics behind each factor, date × symbol."""
    returns = close.pct_change(fill_method=None)
    return {
        "liquidity": np.log(value_traded.where(value_traded > 0)),
        "momentum": close / close.shift(LOOKBACK) - 1.0,
        "volatility": returns.rolling(LOOKBACK, min_periods=LOOKBACK).std(ddof=1),
    }


def high_minus_low(
    characteristic: pd.DataFrame,
    returns: pd.DataFrame,
    universe: pd.DataFrame | None = None,
    quantile: float = QUINTILE,
) -> pd.Series:
    """Equal-weighted top-quantile minus bottom-quantile return, ranking on the previous day's
    value."""
    if not 0 < quantile <= 0.5:
        raise MetricsInputError(f"quantile must be in (0, 0.5], got {quantile}")
    lagged = characteristic.shift(1).reindex_like(returns)
    usable = lagged.notna() & returns.notna()
    if universe is not None:
        usable &= universe.reindex_like(returns).fillna(False).astype(bool)
    ranks = lagged.where(usable).rank(axis=1, method="first")
    count = usable.sum(axis=1)
    size = np.floor(count * quantile).clip(lower=1)
    top = ranks.gt(count - size, axis=0) & usable
    bottom = ranks.le(size, axis=0) & usable
    spread = returns.where(top).mean(axis=1) - returns.where(bottom).mean(axis=1)
    return spread.where(count >= MIN_STOCKS)


def style_factor_returns(
    close: pd.DataFrame,
    value_traded: pd.DataFrame,
    universe: pd.DataFrame | None = None,
    quantile: float = QUINTILE,
) -> pd.DataFrame:
    """Daily High-Low returns of the Liquidity, Momentum and Volatility factors (NaN during
    warm-up)."""
    if close.empty:
        raise MetricsInputError("style factors: the price panel is empty")
    returns = close.pct_change(fill_method=None)
    traits = characteristics(close, value_traded)
    return pd.DataFrame(
        {name: high_minus_low(traits[name], returns, universe, quantile) for name in FACTOR_NAMES}
    )


@dataclass(frozen=True)
class StyleAttribution:
    """Market + style regression and the split of the annual return it implies."""

    regression: RegressionResult
    decomposition: dict[str, float]
    tracking_error: float
    idiosyncratic_volatility: float

    def table(self) -> pd.DataFrame:
        """Table 2 layout: one row per exposure with coefficient, t (plain, HAC), p and annual
        contribution."""
        table = self.regression.as_table().rename(index={"const": "alpha"}).rename_axis("exposure")
        contributions = {
            "alpha": self.decomposition["alpha"],
            "market": self.decomposition["beta_return"],
        }
        contributions.update(
            {
                name: self.decomposition[f"style_{name}"]
                for name in FACTOR_NAMES
                if f"style_{name}" in self.decomposition
            }
        )
        table["annual_contribution"] = pd.Series(contributions)
        return table

    def split_table(self) -> pd.DataFrame:
        """The annual return split (risk-free + beta + style + pure alpha) and the risk it took."""
        d = self.decomposition
        rows = [
            ("annualized return", d["annualized_return"]),
            ("risk-free", d["risk_free"]),
            ("beta return (market)", d["beta_return"]),
            ("style return", d["style_return"]),
            ("pure idiosyncratic alpha", d["alpha"]),
            ("tracking error", self.tracking_error),
            ("idiosyncratic volatility", self.idiosyncratic_volatility),
        ]
        return pd.DataFrame(rows, columns=["component", "annual"])


def style_attribution(
    returns: pd.Series,
    benchmark: pd.Series,
    factors: pd.DataFrame,
    rf: float = 0.0,
    hac_maxlags: int | None = None,
) -> StyleAttribution:
    """Regress excess returns on the market and style factors, over the dates all of them cover."""
    r, b = align(returns, benchmark)
    daily_rf = rf / PERIODS_PER_YEAR
    usable = factors.reindex(r.index).dropna()
    if len(usable) < len(FACTOR_NAMES) + 10:
        raise MetricsInputError(
            f"style attribution: only {len(usable)} of {len(r)} return dates have all "
            "factor returns"
        )
    r, b = r.loc[usable.index], b.loc[usable.index]
    excess_market = (b - daily_rf).rename("market")
    result = ols(r - daily_rf, pd.concat([excess_market, usable], axis=1), hac_maxlags)
    beta_return = float(result.params["market"] * excess_market.mean() * PERIODS_PER_YEAR)
    styles = {
        f"style_{name}": float(result.params[name] * usable[name].mean() * PERIODS_PER_YEAR)
        for name in usable.columns
    }
    decomposition = {
        "annualized_return": annualized_return(r),
        "risk_free": rf,
        "beta_return": beta_return,
        "style_return": sum(styles.values()),
        **styles,
        "alpha": float(result.params["const"] * PERIODS_PER_YEAR),
        "nobs": float(len(r)),
    }
    return StyleAttribution(
        regression=result,
        decomposition=decomposition,
        tracking_error=tracking_error(r, b),
        idiosyncratic_volatility=float(result.residuals.std(ddof=1) * math.sqrt(PERIODS_PER_YEAR)),
    )
