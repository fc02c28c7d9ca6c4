"""Tasks of the parameter-grid replay: load the market once, replay one grid point, publish the
table."""

from __future__ import annotations

import itertools
from datetime import date
from typing import Any

import pandas as pd
from prefect import task
from prefect.artifacts import create_table_artifact

from oomrl.data.sample import ensure_sample
from oomrl.errors import OomrlError
from oomrl.metrics.attribution import benchmark_returns
from oomrl.metrics.performance import compute_metrics
from oomrl.portfolio.rebalance import HISTORY_DAYS, load_panels
from oomrl.portfolio.replay import replay
from oomrl.portfolio.service import bundled_strategy
from oomrl.settings import get_settings

GRID_METRICS = (
    "annualized_return",
    "benchmark_annualized_return",
    "sharpe",
    "max_drawdown",
    "information_ratio",
    "beta",
    "alpha_annualized",
)


def grid_points(strategy: str, grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid, each checked by the strategy's Params in its host.

    A combination that fails the check is a clear error.
    """
    empty = [name for name, values in grid.items() if not values]
    if empty:
        raise OomrlError(f"grid values for {', '.join(empty)} are empty")
    names = sorted(grid)
    points = [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(grid[n] for n in names))
    ]
    bundled_strategy(get_settings(), strategy).check_params(points)  # names the offending point
    return points


@task(retries=2, retry_delay_seconds=5)
def load_market(start: date, end: date) -> tuple[dict[str, pd.DataFrame], pd.Series]:
    """Date x symbol panels covering [start − history, end] and CSI 300 daily returns."""
    store = ensure_sample(get_settings())
    panels = load_panels(store, end, history_days=(end - start).days + HISTORY_DAYS)
    return panels, benchmark_returns(store)


@task(task_run_name="replay {strategy} {params}")
def replay_point(
    strategy: str,
    params: dict[str, Any],
    panels: dict[str, pd.DataFrame],
    benchmark: pd.Series,
    start: date,
    end: date,
) -> dict[str, Any]:
    """Replay one grid point; its summary and Table 1 metrics, one flat row."""
    result = replay(bundled_strategy(get_settings(), strategy), params, panels, start, end)
    returns = result.nav.set_index(pd.to_datetime(result.nav["date"]))["realized_return"].astype(
        float
    )
    metrics = compute_metrics(returns, benchmark) if len(returns) > 2 else {}
    summary = result.summary()
    row: dict[str, Any] = {
        **params,
        "trading_days": summary["trading_days"],
        "net_return": summary["net_return"],
        "turnover_annualized": summary["turnover_annualized"],
        "costs_fraction": summary["costs_fraction"],
        "halted_on": str(summary["halted_on"]) if summary["halted_on"] else None,
    }
    row.update({key: metrics.get(key) for key in GRID_METRICS})
    return row


@task
def publish_grid(strategy: str, rows: list[dict[str, Any]], start: date, end: date) -> str:
    """A table artifact of the grid, best Sharpe first; returns its key."""
    ranked = sorted(rows, key=lambda row: (row.get("sharpe") is None, -(row.get("sharpe") or 0.0)))
    key = f"replay-grid-{strategy.replace('_', '-')}"
    create_table_artifact(
        table=ranked,
        key=key,
        description=f"# {strategy}: parameter grid, {start} → {end}\nBest Sharpe first.",
    )
    return key
