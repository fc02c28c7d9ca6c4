"""The glossary: what each reported number is called, its unit, and what it means."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Unit = Literal[
    "percent",
    "percent_fine",
    "percent_yr",
    "ratio",
    "count",
    "cny",
    "bps",
    "times",
    "times_yr",
    "text",
    "coef",
]

UNIT_SUFFIX: dict[str, str] = {
    "percent": "%",
    "percent_fine": "%",
    "percent_yr": "% a year",
    "bps": "bp",
    "cny": "CNY",
    "times": "× NAV",
    "times_yr": "× NAV a year",
}


@dataclass(frozen=True)
class Label:
    """A metric's human name (with its unit), how to format it, and a one-line definition."""

    name: str
    unit: Unit
    definition: str

    @property
    def heading(self) -> str:
        """The name with its unit, e.g. "Annualized return (% a year)"."""
        suffix = UNIT_SUFFIX.get(self.unit)
        return f"{self.name} ({suffix})" if suffix else self.name


GLOSSARY: dict[str, Label] = {
    # performance (the `oomrl metrics` keys)
    "trading_days": Label("Sessions", "count", "XSHG trading sessions in the window."),
    "sessions": Label("Sessions", "count", "XSHG trading sessions in the window."),
    "annualized_return": Label(
        "Annualized return",
        "percent_yr",
        "Mean daily return × 252 (arithmetic; the paper's convention).",
    ),
    "cagr": Label(
        "CAGR", "percent_yr", "Compound annual growth: (end wealth / start)^(252 / sessions) − 1."
    ),
    "cumulative_return": Label(
        "Cumulative return", "percent", "End wealth / start wealth − 1 over the window."
    ),
    "benchmark_annualized_return": Label(
        "CSI 300 annualized return", "percent_yr", "The benchmark's mean daily return × 252."
    ),
    "benchmark_cagr": Label(
        "CSI 300 CAGR", "percent_yr", "The benchmark's compound annual growth."
    ),
    "excess_return": Label(
        "Excess return", "percent_yr", "Annualized return minus the CSI 300's annualized return."
    ),
    "volatility": Label("Volatility", "percent_yr", "Standard deviation of daily returns × √252."),
    "sharpe": Label(
        "Sharpe ratio",
        "ratio",
        "Mean daily return over the risk-free rate ÷ its standard deviation × √252.",
    ),
    "sortino": Label(
        "Sortino ratio",
        "ratio",
        "Like Sharpe, but only days below the risk-free rate count as risk.",
    ),
    "max_drawdown": Label(
        "Max drawdown",
        "percent",
        "Deepest fall from a running peak of wealth (the starting capital is the first peak).",
    ),
    "calmar": Label("Calmar ratio", "ratio", "CAGR ÷ |max drawdown|."),
    "tracking_error": Label(
        "Tracking error",
        "percent_yr",
        "Standard deviation of the daily active return (portfolio − CSI 300) × √252.",
    ),
    "information_ratio": Label(
        "Information ratio",
        "ratio",
        "Annualized active return ÷ tracking error: excess return per unit of active risk.",
    ),
    "beta": Label(
        "Beta to CSI 300",
        "ratio",
        "Slope of the daily excess return on the CSI 300's (1 = moves with the index).",
    ),
    "alpha_annualized": Label(
        "CAPM alpha",
        "percent_yr",
        "Intercept of the regression on the CSI 300 alone × 252: return not explained "
        "by market exposure.",
    ),
    "alpha_tstat": Label(
        "CAPM alpha t-stat (OLS)", "ratio", "Alpha ÷ its plain OLS standard error."
    ),
    "alpha_pvalue": Label(
        "CAPM alpha p-value", "ratio", "Chance of an alpha this far from 0 if the true alpha is 0."
    ),
    "alpha_tstat_hac": Label(
        "CAPM alpha t-stat (Newey-West)",
        "ratio",
        "Alpha ÷ its standard error robust to autocorrelation and heteroskedasticity; "
        "|t| > 2 is the usual bar.",
    ),
    "r_squared": Label(
        "R² vs CSI 300", "ratio", "Share of daily return variance the CSI 300 explains."
    ),
    # friction (ledger)
    "rebalances": Label("Rebalances", "count", "Sessions on which the account traded."),
    "turnover": Label("Turnover", "times", "Value traded ÷ NAV, summed over the sessions."),
    "turnover_annualized": Label("Turnover", "times_yr", "Value traded ÷ NAV, per session, × 252."),
    "turnover_per_rebalance": Label(
        "Turnover per rebalance", "percent", "Average value traded on a rebalance ÷ NAV."
    ),
    "costs_total": Label(
        "Costs paid", "cny", "Commission + stamp duty + transfer fee + market impact, in CNY."
    ),
    "cost_drag": Label(
        "Cost drag", "percent_yr", "Costs ÷ NAV before the session, per session, × 252."
    ),
    "commission": Label(
        "Commission", "cny", "Broker commission (0.025 %, at least 5 CNY an order)."
    ),
    "stamp_duty": Label(
        "Stamp duty", "cny", "Tax on sells (0.05 % from 2023-08-28, 0.1 % before)."
    ),
    "transfer_fee": Label("Transfer fee", "cny", "Exchange transfer fee (0.001 % both sides)."),
    "impact_cost": Label(
        "Market impact",
        "cny",
        "Price moved against the order: k·σ·√(order / ADV) plus half-spread.",
    ),
    "slippage_leakage": Label(
        "Slippage leakage",
        "percent",
        "Frictionless return − realized return, summed: what friction took from the paper PnL.",
    ),
    "slippage_leakage_annualized": Label(
        "Slippage leakage", "percent_yr", "Frictionless − realized return per session × 252."
    ),
    "leakage_bps": Label(
        "Slippage leakage",
        "bps",
        "Frictionless − realized return over the period, in basis points.",
    ),
    "cost_bps": Label("Costs", "bps", "Costs ÷ NAV over the period, in basis points."),
    "adv_participation_mean": Label(
        "ADV participation, mean",
        "percent_fine",
        "A fill's shares ÷ the symbol's average daily volume, averaged over fills.",
    ),
    "adv_participation_max": Label(
        "ADV participation, max", "percent_fine", "The largest fill's share of ADV."
    ),
    "fills": Label("Fills", "count", "Executed orders (one per symbol and session)."),
    "fills_over_cap": Label(
        "Fills over 5 % of ADV",
        "percent",
        "Share of fills above the repair mandate's usual 5 % ADV cap.",
    ),
    "reward_total": Label(
        "Reward Σ (Eq. 1-2)",
        "ratio",
        "Sum of the paper's step rewards: return before costs − λ‖Δw‖₁ − γ√‖Δw‖₁, "
        "and −P_terminal on the step the kill switch trips.",
    ),
    # style attribution (Table 2)
    "coef": Label("Coefficient (daily)", "coef", "Regression coefficient on daily returns."),
    "t": Label("t (OLS)", "ratio", "Coefficient ÷ plain OLS standard error."),
    "p": Label("p (OLS)", "ratio", "Plain OLS p-value."),
    "t_hac": Label("t (Newey-West)", "ratio", "Coefficient ÷ HAC standard error."),
    "p_hac": Label("p (Newey-West)", "ratio", "HAC p-value."),
    "annual_contribution": Label(
        "Contribution",
        "percent_yr",
        "Coefficient × the factor's mean daily return × 252 (alpha: intercept × 252).",
    ),
    "annual": Label("Value", "percent_yr", "Annualized."),
    # period tables
    "portfolio": Label(
        "Portfolio", "percent", "Compounded return of the portfolio over the period."
    ),
    "benchmark": Label("CSI 300", "percent", "Compounded return of the CSI 300 over the period."),
    "excess": Label("Excess", "percent", "Portfolio − CSI 300 over the period."),
    "depth": Label("Depth", "percent", "Fall from the peak to the valley."),
    "to_valley": Label(
        "Sessions to valley", "count", "Sessions from the peak to the lowest point."
    ),
    "to_recovery": Label(
        "Sessions to recover", "count", "Sessions from the valley back to the peak (— if not yet)."
    ),
    "length": Label(
        "Length", "count", "Sessions from the peak to the recovery (or to the end of the data)."
    ),
}

PERCENT_UNITS = frozenset({"percent", "percent_yr"})


def label(key: str) -> Label:
    """The glossary entry of `key`. An unknown key is shown as itself, never an error in a
    report."""
    return GLOSSARY.get(key) or Label(key.replace("_", " "), "text", "")


def format_value(key: str, value: object) -> str:
    """A value in its key's unit.

    Percent with two decimals, ratios with three, CNY with separators, '—' for undefined. Unknown
    keys: floats with three decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    unit = label(key).unit
    if unit in PERCENT_UNITS:
        return f"{value * 100:.2f} %"
    if unit == "percent_fine":  # shares of ADV are often hundredths of a percent
        return f"{value * 100:.3f} %"
    if unit == "bps":
        return f"{value * 10_000:.1f}"
    if unit == "cny":
        return f"{value:,.0f}"
    if unit in ("times", "times_yr"):
        return f"{value:.2f}×"
    if unit == "count":
        return f"{int(value):,}"
    if isinstance(value, int):
        return str(value)
    return f"{value:.5f}" if unit == "coef" else f"{value:.3f}"  # daily coefficients are small
