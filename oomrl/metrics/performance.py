"""Performance of a daily return series against a benchmark, as `oomrl metrics` computes it.

The conventions are those of docs/metrics.md, pinned by tests:
- 252 periods a year. `annualized_return` = mean daily simple return × 252 (the paper's
  arithmetic convention). `cagr` = Π(1+r)^(252/n) − 1 alongside it.
- Standard deviations use ddof=1. `volatility` = std(r)·√252.
- Sharpe = mean(r − rf/252) / std(r − rf/252) · √252, with rf an annual rate.
- Sortino = mean(r − rf/252)·252 / (√mean(min(r − rf/252, 0)²)·√252) (empyrical's downside
  deviation).
- Max drawdown is ≤ 0. The starting capital (wealth 1 before the first return) is the first
  high-water mark. So a first-day loss is a drawdown. Calmar = cagr / |max drawdown|.
- Tracking error = std(r − b)·√252; IR = mean(r − b)·252 / tracking error.
- Alpha/beta from OLS of (r − rf/252) on (b − rf/252); alpha annualized ×252. t-stats plain and
  Newey-West (lags: regression.newey_west_maxlags). `alpha_pvalue` is the plain OLS p-value.
- A ratio whose denominator is zero is undefined and reported as None (JSON null), never ±inf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from oomrl.errors import MetricsInputError
from oomrl.metrics.io import align, validate_returns
from oomrl.metrics.regression import capm

PERIODS_PER_YEAR = 252
ROLLING_IR_WINDOW = 60

METRIC_KEYS: tuple[str, ...] = (
    "trading_days",
    "annualized_return",
    "cagr",
    "benchmark_annualized_return",
    "benchmark_cagr",
    "volatility",
    "sharpe",
    "sortino",
    "max_drawdown",
    "calmar",
    "tracking_error",
    "information_ratio",
    "beta",
    "alpha_annualized",
    "alpha_tstat",
    "alpha_pvalue",
    "alpha_tstat_hac",
    "r_squared",
)


# A ratio's denominator below this is numerically zero: the ratio is undefined (None). Sharpe's
# denominator is the daily sd / sqrt(252). So it is undefined for a daily sd under
# 1e-15 * sqrt(252).
ZERO_DENOMINATOR = 1e-15


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None when the denominator is (numerically) zero."""
    if not math.isfinite(denominator) or abs(denominator) < ZERO_DENOMINATOR:
        return None
    return float(numerator / denominator)


def annualized_return(returns: pd.Series) -> float:
    """Mean daily simple return × 252 (arithmetic, the paper's convention)."""
    return float(returns.mean() * PERIODS_PER_YEAR)


def cagr(returns: pd.Series) -> float:
    """Compound annual growth rate: Π(1+r)^(252/n) − 1."""
    growth = float(np.prod(1.0 + returns.to_numpy()))
    return float(growth ** (PERIODS_PER_YEAR / len(returns))) - 1.0


def volatility(returns: pd.Series) -> float:
    """Annualized standard deviation (ddof=1)."""
    return float(returns.std(ddof=1) * math.sqrt(PERIODS_PER_YEAR))


def sharpe(returns: pd.Series, rf: float = 0.0) -> float | None:
    """Annualized Sharpe ratio with rf (annual) spread evenly as rf/252 per day."""
    excess = returns - rf / PERIODS_PER_YEAR
    return _ratio(float(excess.mean()), float(excess.std(ddof=1)) / math.sqrt(PERIODS_PER_YEAR))


def sortino(returns: pd.Series, rf: float = 0.0) -> float | None:
    """Annualized mean excess return over the annualized downside deviation below rf/252."""
    excess = returns - rf / PERIODS_PER_YEAR
    downside = math.sqrt(float((np.minimum(excess.to_numpy(), 0.0) ** 2).mean()))
    return _ratio(float(excess.mean()) * PERIODS_PER_YEAR, downside * math.sqrt(PERIODS_PER_YEAR))


def wealth(returns: pd.Series) -> pd.Series:
    """Growth of 1 unit of starting capital."""
    return (1.0 + returns).cumprod()


def drawdown_series(returns: pd.Series) -> pd.Series:
    """Drawdown (≤ 0) at each date; the starting capital of 1 is the first high-water mark."""
    curve = wealth(returns)
    peak = np.maximum(curve.cummax(), 1.0)
    return curve / peak - 1.0


def max_drawdown(returns: pd.Series) -> float:
    """The deepest drawdown (≤ 0), counting the starting capital as the first high-water mark."""
    return float(min(drawdown_series(returns).min(), 0.0))


def tracking_error(returns: pd.Series, benchmark: pd.Series) -> float:
    """Annualized standard deviation (ddof=1) of the active return r − b."""
    return float((returns - benchmark).std(ddof=1) * math.sqrt(PERIODS_PER_YEAR))


def information_ratio(returns: pd.Series, benchmark: pd.Series) -> float | None:
    """mean(r − b)·252 / (std(r − b)·√252)."""
    active = returns - benchmark
    return _ratio(float(active.mean()) * PERIODS_PER_YEAR, tracking_error(returns, benchmark))


def rolling_information_ratio(
    returns: pd.Series, benchmark: pd.Series, window: int = ROLLING_IR_WINDOW
) -> pd.Series:
    """Information ratio over each trailing `window` sessions (NaN until the window is full)."""
    active = returns - benchmark
    mean = active.rolling(window).mean() * PERIODS_PER_YEAR
    std = active.rolling(window).std(ddof=1) * math.sqrt(PERIODS_PER_YEAR)
    return (mean / std.where(std > 1e-15)).rename("rolling_ir")


def standalone_metrics(returns: pd.Series, rf: float = 0.0) -> dict[str, float | int | None]:
    """The metric keys that need no benchmark (a plain series, e.g. the index itself)."""
    r = validate_returns(returns, "returns")
    mdd = max_drawdown(r)
    growth = cagr(r)
    return {
        "trading_days": len(r),
        "annualized_return": annualized_return(r),
        "cagr": growth,
        "volatility": volatility(r),
        "sharpe": sharpe(r, rf),
        "sortino": sortino(r, rf),
        "max_drawdown": mdd,
        "calmar": _ratio(growth, abs(mdd)),
    }


def compute_metrics(
    returns: pd.Series, benchmark: pd.Series, rf: float = 0.0, hac_maxlags: int | None = None
) -> dict[str, float | int | None]:
    """Every metric key (METRIC_KEYS), in its order, as fractions (not percent)."""
    if not math.isfinite(rf):
        raise MetricsInputError(f"rf must be a finite annual rate, got {rf}")
    r, b = align(returns, benchmark)
    daily_rf = rf / PERIODS_PER_YEAR
    regression = capm(r - daily_rf, b - daily_rf, hac_maxlags)
    exact = regression.r_squared > 1.0 - 1e-12
    values: dict[str, float | int | None] = {
        **standalone_metrics(r, rf),
        "benchmark_annualized_return": annualized_return(b),
        "benchmark_cagr": cagr(b),
        "tracking_error": tracking_error(r, b),
        "information_ratio": information_ratio(r, b),
        "beta": float(regression.params["beta"]),
        "alpha_annualized": float(regression.params["alpha"]) * PERIODS_PER_YEAR,
        # a perfect fit leaves no residual variance: its t-statistics would be rounding noise
        "alpha_tstat": None if exact else float(regression.tstats["alpha"]),
        "alpha_pvalue": None if exact else float(regression.pvalues["alpha"]),
        "alpha_tstat_hac": None if exact else float(regression.tstats_hac["alpha"]),
        "r_squared": regression.r_squared,
    }
    return {key: values[key] for key in METRIC_KEYS}


@dataclass(frozen=True)
class Phase:
    """A named date range [start, end]: a strategy version's live span or a user-given window."""

    name: str
    start: pd.Timestamp
    end: pd.Timestamp


def read_phases(path: str | Path) -> list[Phase]:
    """Phases from a CSV (`name,start,end`) or a YAML/JSON list of {name, start, end}."""
    path = Path(path)
    if not path.exists():
        raise MetricsInputError(f"phases file {path} does not exist")
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        rows = yaml.safe_load(path.read_text()) or []
        if isinstance(rows, dict):
            rows = rows.get("phases", [])
    else:
        rows = pd.read_csv(path, dtype=str).to_dict("records")
    phases: list[Phase] = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not {"name", "start", "end"} <= set(row):
            raise MetricsInputError(f"phases file {path}: entry {number} needs name, start and end")
        try:
            start, end = pd.Timestamp(str(row["start"])), pd.Timestamp(str(row["end"]))
        except ValueError as exc:
            raise MetricsInputError(
                f"phases file {path}: entry {number} has a bad date ({exc})"
            ) from exc
        if start > end:
            raise MetricsInputError(f"phases file {path}: {row['name']} starts after it ends")
        phases.append(Phase(str(row["name"]), start, end))
    if not phases:
        raise MetricsInputError(f"phases file {path} lists no phases")
    return phases


def phases_from_versions(versions: pd.Series, width: int | None = 12) -> list[Phase]:
    """One phase per contiguous live span of a strategy version.

    The input is a date-indexed series of version ids or labels. A phase is named by the first
    `width` characters (None: the whole label)."""
    clean = versions.dropna().sort_index()
    phases: list[Phase] = []
    for _, run in clean.groupby((clean != clean.shift()).cumsum()):
        label = str(run.iloc[0])
        phases.append(Phase(label[:width], pd.Timestamp(run.index[0]), pd.Timestamp(run.index[-1])))
    return phases


def phase_table(
    returns: pd.Series, phases: list[Phase], benchmark: pd.Series | None = None, rf: float = 0.0
) -> pd.DataFrame:
    """Per-phase metrics (the paper's Table 1): sessions, annualized return, CAGR, risk, and vs
    benchmark."""
    r = validate_returns(returns, "returns")
    b = align(r, benchmark)[1] if benchmark is not None else None
    rows = []
    for phase in phases:
        part = r.loc[phase.start : phase.end]
        if part.empty:
            raise MetricsInputError(
                f"phase {phase.name!r} ({phase.start.date()}..{phase.end.date()}) "
                f"has no returns (data covers {r.index[0].date()}..{r.index[-1].date()})"
            )
        row: dict[str, object] = {
            "phase": phase.name,
            "start": part.index[0].date().isoformat(),
            "end": part.index[-1].date().isoformat(),
            "sessions": len(part),
            "annualized_return": annualized_return(part),
            "cagr": cagr(part),
            "cumulative_return": float(wealth(part).iloc[-1] - 1.0),
            "volatility": volatility(part) if len(part) > 1 else None,
            "sharpe": sharpe(part, rf) if len(part) > 1 else None,
            "max_drawdown": max_drawdown(part),
        }
        if b is not None:
            bench = b.loc[part.index]
            row["benchmark_annualized_return"] = annualized_return(bench)
            row["excess_return"] = row["annualized_return"] - row["benchmark_annualized_return"]  # type: ignore[operator]
            row["information_ratio"] = information_ratio(part, bench) if len(part) > 1 else None
        rows.append(row)
    return pd.DataFrame(rows)
