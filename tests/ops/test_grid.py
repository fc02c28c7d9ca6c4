"""The parameter-grid replay: grid validation in the strategy host, and a real run on a 2-worker
Dask LocalCluster."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oomrl.errors import OomrlError
from tasks.grid import grid_points


def test_grid_points_are_the_cartesian_product() -> None:
    points = grid_points("daily_momentum", {"top_k": [5, 10], "lookback": [5, 20, 60]})
    assert len(points) == 6
    assert points[0] == {"lookback": 5, "top_k": 5} and points[-1] == {"lookback": 60, "top_k": 10}


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (
            {"window": [1]},
            "invalid params for daily_momentum: window: Extra inputs are not permitted "
            "(got 1) (parameters {'window': 1})",
        ),
        ({"top_k": []}, "grid values for top_k are empty"),
        (
            {"top_k": [5, 0]},
            "invalid params for daily_momentum: top_k: Input should be greater than or "
            "equal to 1 (got 0) (parameters {'top_k': 0})",
        ),
    ],
)
def test_bad_grids_are_named_in_one_line(grid: dict, message: str) -> None:
    with pytest.raises(OomrlError) as refused:
        grid_points("daily_momentum", grid)
    assert str(refused.value) == message


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(OomrlError, match="unknown strategy 'nope'"):
        grid_points("nope", {"top_k": [1]})


@pytest.mark.slow
def test_replay_point_row(oomrl_home: Path) -> None:
    from tasks.grid import GRID_METRICS, load_market, replay_point

    panels, benchmark = load_market.fn(date(2024, 7, 1), date(2024, 8, 30))
    row = replay_point.fn(
        "daily_momentum", {"top_k": 5}, panels, benchmark, date(2024, 7, 1), date(2024, 8, 30)
    )
    assert row["top_k"] == 5 and row["trading_days"] > 30 and set(GRID_METRICS) <= set(row)
    assert row["halted_on"] is None or row["halted_on"].startswith("2024-")


@pytest.mark.dask
@pytest.mark.usefixtures("prefect_harness")
def test_replay_grid_on_two_dask_workers(oomrl_home: Path) -> None:
    from prefect.client.orchestration import get_client

    from flows.grid import replay_grid
    from tasks.runners import task_runner_from_settings

    runner = task_runner_from_settings({"OOMRL_DASK_WORKERS": "2", "OOMRL_DASK_PROCESSES": "0"})
    rows = replay_grid.with_options(task_runner=runner)(
        strategy="daily_momentum",
        grid={"top_k": [5, 20]},
        start=date(2024, 7, 1),
        end=date(2024, 8, 30),
    )
    assert [row["top_k"] for row in rows] == [5, 20]
    for row in rows:
        assert row["trading_days"] > 30 and row["sharpe"] is not None
        assert -1 < row["net_return"] < 1 and row["turnover_annualized"] > 0
    assert rows[0]["net_return"] != rows[1]["net_return"]

    import asyncio

    async def artifact_rows() -> str:
        async with get_client() as client:
            artifact = await client.read_latest_artifacts()
            return str([a.data for a in artifact if a.key == "replay-grid-daily-momentum"])

    assert "top_k" in asyncio.run(artifact_rows())
