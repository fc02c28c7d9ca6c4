"""Flow `replay_grid`: replay one strategy over a parameter grid in parallel (Dask when
configured)."""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow, unmapped

from oomrl.build_info import flow_version
from tasks.expected_ends import configure_flow_logging
from tasks.grid import grid_points, load_market, publish_grid, replay_point
from tasks.runners import task_runner_from_settings

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs


@flow(
    name="replay-grid",
    version=FLOW_VERSION,
    retries=1,
    retry_delay_seconds=10,
    task_runner=task_runner_from_settings(),
    log_prints=True,
)
def replay_grid(
    strategy: str = "daily_momentum",
    grid: dict[str, list[Any]] | None = None,
    start: date = date(2024, 7, 1),
    end: date = date(2026, 2, 27),
) -> list[dict[str, Any]]:
    """Replay `strategy` once per combination of `grid` (e.g. {"top_k": [5, 10], "lookback": [5,
    20]})."""
    points = grid_points(strategy, grid or {"top_k": [5, 10, 20], "lookback": [5, 20]})
    panels, benchmark = load_market(start, end)
    futures = replay_point.map(strategy, points, unmapped(panels), unmapped(benchmark), start, end)
    rows = [future.result() for future in futures]
    publish_grid(strategy, rows, start, end)
    return rows
