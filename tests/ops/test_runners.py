"""Task runner selection and a real mapped flow on a 2-worker Dask LocalCluster."""

from __future__ import annotations

from typing import Any

import pytest
from prefect.task_runners import ThreadPoolTaskRunner

from tasks.runners import dask_settings, task_runner_from_settings


def test_default_is_a_thread_pool() -> None:
    runner = task_runner_from_settings({})
    assert isinstance(runner, ThreadPoolTaskRunner)
    assert isinstance(task_runner_from_settings({"OOMRL_THREADS": "3"}), ThreadPoolTaskRunner)


@pytest.mark.dask
def test_address_selects_an_existing_cluster() -> None:
    from prefect_dask import DaskTaskRunner

    runner = task_runner_from_settings({"OOMRL_DASK_ADDRESS": "tcp://scheduler:8786"})
    assert isinstance(runner, DaskTaskRunner) and runner.address == "tcp://scheduler:8786"


def test_workers_select_a_local_cluster() -> None:
    assert dask_settings({"OOMRL_DASK_WORKERS": "2", "OOMRL_DASK_PROCESSES": "0"}) == {
        "cluster_kwargs": {
            "n_workers": 2,
            "threads_per_worker": 1,
            "processes": False,
            "protocol": "tcp://",
            "host": "127.0.0.1",
            "dashboard_address": None,
        }
    }
    assert dask_settings({"OOMRL_DASK_WORKERS": "3"})["cluster_kwargs"]["processes"] is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OOMRL_DASK_WORKERS": "two"}, "positive integer"),
        ({"OOMRL_DASK_WORKERS": "0"}, "positive integer"),
        ({"OOMRL_THREADS": "-1"}, "OOMRL_THREADS"),
        ({"OOMRL_DASK_ADDRESS": "scheduler:8786"}, "scheduler URL"),
    ],
)
def test_bad_configuration_is_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        task_runner_from_settings(env)


def test_missing_prefect_dask_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    with pytest.raises(RuntimeError, match="prefect-dask is not installed"):
        task_runner_from_settings({"OOMRL_DASK_WORKERS": "2"})


@pytest.mark.dask
@pytest.mark.usefixtures("prefect_harness")
def test_mapped_tasks_run_on_two_dask_workers() -> None:
    from prefect import flow, task

    @task
    def where(value: int) -> tuple[int, str]:
        import time

        from distributed import get_worker

        time.sleep(0.2)  # long enough that one single-threaded worker cannot take every task
        return value * value, get_worker().address

    runner = task_runner_from_settings({"OOMRL_DASK_WORKERS": "2", "OOMRL_DASK_PROCESSES": "0"})

    @flow(task_runner=runner)
    def squares(values: list[int]) -> list[Any]:
        return [future.result() for future in where.map(values)]

    results = squares(list(range(8)))
    assert [value for value, _ in results] == [v * v for v in range(8)]
    workers = {address for _, address in results}
    assert len(workers) == 2 and all(address.startswith("tcp://127.0.0.1:") for address in workers)


@pytest.mark.slow
def test_dask_tests_skip_without_the_dask_extra() -> None:
    """Without prefect-dask and distributed (the `dask` extra), a test marked `dask` skips, naming
    why."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    blocked = (
        "import sys; sys.modules['prefect_dask'] = sys.modules['distributed'] = None; "
        "import pytest; "
        "sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', "
        "'tests/ops/test_runners.py::test_address_selects_an_existing_cluster']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert (
        "1 skipped" in result.stdout
        and "dask extra absent: prefect_dask is not installed" in result.stdout
    )
