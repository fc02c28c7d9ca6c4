"""Cross-validation replays as Prefect tasks, fanned out on Dask when OOMRL_DASK_* is configured."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import TaskRunner

from oomrl.repair.crossval import VersionMapper, VersionMeasures, replay_version, run_in_process
from tasks.retry import unless_refused
from tasks.runners import dask_settings, task_runner_from_settings


@task(
    name="crossval-replay",
    retries=1,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def replay_version_task(call: dict[str, Any]) -> list[VersionMeasures]:
    """Replay and measure one version (active, candidate or baseline) wherever the task runner puts
    it."""
    return replay_version(**call)


def on_task_runner(
    calls: list[dict[str, Any]], runner: TaskRunner[Any] | None = None
) -> list[list[VersionMeasures]]:
    """A VersionMapper that runs the replays side by side as tasks on `runner` (default: from
    settings)."""
    runner = runner or task_runner_from_settings()
    with runner:
        futures = [runner.submit(replay_version_task, parameters={"call": call}) for call in calls]
        return [future.result() for future in futures]


def version_mapper_from_settings() -> VersionMapper:
    """Dask-backed replays when the environment configures Dask; otherwise in process, one by
    one."""
    return on_task_runner if dask_settings() is not None else run_in_process
