"""Ordinary least squares through statsmodels with plain and Newey-West (HAC) standard errors."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import statsmodels.api as sm

from oomrl.errors import MetricsInputError


def newey_west_maxlags(nobs: int) -> int:
    """The HAC lag truncation: floor(4·(T/100)^(2/9)) (Newey and West 1994), at least 1.

    For daily data: 4 lags for a year of 252 sessions, 5 for 273..620 sessions (about a week).
    """
    return max(1, math.floor(4.0 * float((nobs / 100.0) ** (2.0 / 9.0))))


@dataclass(frozen=True)
class RegressionResult:
    """Coefficients of y = const + Σ βₖ xₖ + ε with plain and HAC inference."""

    params: pd.Series
    tstats: pd.Series
    pvalues: pd.Series
    tstats_hac: pd.Series
    pvalues_hac: pd.Series
    r_squared: float
    nobs: int
    hac_maxlags: int
    residuals: pd.Series

    def as_table(self) -> pd.DataFrame:
        """One row per coefficient: estimate, t, p (plain and HAC)."""
        return pd.DataFrame(
            {
                "coef": self.params,
                "t": self.tstats,
                "p": self.pvalues,
                "t_hac": self.tstats_hac,
                "p_hac": self.pvalues_hac,
            }
        )


def ols(y: pd.Series, regressors: pd.DataFrame, hac_maxlags: int | None = None) -> RegressionResult:
    """Regress y on a constant and the regressors (aligned on the index).

    HAC uses the Bartlett kernel with statsmodels' small-sample correction; `hac_maxlags`
    defaults to `newey_west_maxlags(nobs)`.
    """
    frame = pd.concat([y.rename("__y__"), regressors], axis=1, join="inner")
    if frame.isna().to_numpy().any():
        raise MetricsInputError("regression inputs contain NaN after alignment")
    nobs = len(frame)
    k = regressors.shape[1] + 1
    if nobs <= k:
        raise MetricsInputError(f"regression needs more than {k} observations, got {nobs}")
    design = sm.add_constant(frame.drop(columns="__y__"), has_constant="add")
    flat = design.drop(columns="const").std(ddof=0) < 1e-15
    if flat.any():
        raise MetricsInputError(
            f"regressor(s) {', '.join(map(str, flat[flat].index))} are constant: "
            "their coefficient is undefined"
        )
    lags = newey_west_maxlags(nobs) if hac_maxlags is None else hac_maxlags
    plain = sm.OLS(frame["__y__"], design).fit()
    hac = sm.OLS(frame["__y__"], design).fit(
        cov_type="HAC", cov_kwds={"maxlags": lags, "use_correction": True}
    )
    return RegressionResult(
        params=plain.params,
        tstats=plain.tvalues,
        pvalues=plain.pvalues,
        tstats_hac=hac.tvalues,
        pvalues_hac=hac.pvalues,
        r_squared=float(plain.rsquared),
        nobs=nobs,
        hac_maxlags=lags,
        residuals=plain.resid,
    )


def capm(
    excess_returns: pd.Series, excess_benchmark: pd.Series, hac_maxlags: int | None = None
) -> RegressionResult:
    """Single-index regression (r−rf) = α + β(b−rf) + ε; coefficients are named `alpha` and
    `beta`."""
    result = ols(excess_returns, excess_benchmark.rename("beta").to_frame(), hac_maxlags)
    rename = {"const": "alpha"}
    return RegressionResult(
        params=result.params.rename(rename),
        tstats=result.tstats.rename(rename),
        pvalues=result.pvalues.rename(rename),
        tstats_hac=result.tstats_hac.rename(rename),
        pvalues_hac=result.pvalues_hac.rename(rename),
        r_squared=result.r_squared,
        nobs=result.nobs,
        hac_maxlags=result.hac_maxlags,
        residuals=result.residuals,
    )
