"""Cross-validation replays fan out on a 2-worker Dask LocalCluster when Dask is configured."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oomrl.diagnostics.mandate import Constraints
from oomrl.repair.crossval import run_in_process
from tasks.crossval import on_task_runner, version_mapper_from_settings
from tests.agent.conftest import repair_home, sample_data  # noqa: F401 - fixtures

WEEKLY = Constraints(rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3)


def test_mapper_follows_the_dask_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OOMRL_DASK_ADDRESS", raising=False)
    monkeypatch.delenv("OOMRL_DASK_WORKERS", raising=False)
    assert version_mapper_from_settings() is run_in_process
    monkeypatch.setenv("OOMRL_DASK_WORKERS", "2")
    assert version_mapper_from_settings() is on_task_runner


@pytest.mark.dask
@pytest.mark.usefixtures("prefect_harness")
def test_both_versions_replay_on_two_dask_workers_with_the_same_result(repair_home: Path) -> None:  # noqa: F811
    from prefect_dask import DaskTaskRunner

    from oomrl.checkout import repo_root
    from oomrl.data.sample import ensure_sample
    from oomrl.repair.crossval import cross_validate, window_for
    from oomrl.settings import get_settings
    from tasks.runners import task_runner_from_settings

    runner = task_runner_from_settings({"OOMRL_DASK_WORKERS": "2", "OOMRL_DASK_PROCESSES": "0"})
    assert isinstance(runner, DaskTaskRunner)
    store = ensure_sample(get_settings())
    start, end = window_for(store, date(2024, 7, 15), 20)
    args = (repo_root(), repo_root(), "weekly_liquidity", WEEKLY, store, start, end)
    on_dask = cross_validate(
        *args, mapper=lambda calls: on_task_runner(calls, runner=runner), long_sessions=40
    )
    in_process = cross_validate(*args, long_sessions=40)
    assert [(row.version, row.window) for row in on_dask.rows] == [
        ("active", "long"),
        ("active", "alert"),
        ("candidate", "long"),
        ("candidate", "alert"),
    ]
    assert on_dask.rows == in_process.rows and on_dask.passed == in_process.passed
