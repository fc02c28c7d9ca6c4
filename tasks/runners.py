"""Which Prefect task runner parallel flows use: Dask when configured (OOMRL_DASK_*), threads
otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from oomrl.settings import get_settings

DASK_ADDRESS_ENV = "OOMRL_DASK_ADDRESS"  # e.g. tcp://scheduler:8786 — an existing cluster
DASK_WORKERS_ENV = "OOMRL_DASK_WORKERS"  # e.g. 4 — a temporary LocalCluster per flow run
DASK_PROCESSES_ENV = "OOMRL_DASK_PROCESSES"  # "0" keeps LocalCluster workers as threads in-process
THREADS_ENV = "OOMRL_THREADS"  # width of the default thread pool


def _flag(text: str) -> bool:
    return text.strip().lower() not in ("0", "false", "no", "off", "")


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {text!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {text!r}")
    return value


def dask_settings(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The DaskTaskRunner keyword arguments the settings ask for (`env`: the variables by name), or
    None."""
    env = get_settings().runtime.dask_env() if env is None else env
    address = env.get(DASK_ADDRESS_ENV, "").strip()
    workers = env.get(DASK_WORKERS_ENV, "").strip()
    if address:
        if not address.startswith(("tcp://", "tls://", "inproc://", "ws://", "wss://")):
            raise ValueError(
                f"{DASK_ADDRESS_ENV} must be a scheduler URL like tcp://host:8786, got {address!r}"
            )
        return {"address": address}
    if workers:
        count = _positive_int(DASK_WORKERS_ENV, workers)
        processes = _flag(env.get(DASK_PROCESSES_ENV, "1"))
        return {
            "cluster_kwargs": {
                "n_workers": count,
                "threads_per_worker": 1,
                "processes": processes,
                # loopback TCP: a LocalCluster serves this machine only
                "protocol": "tcp://",
                "host": "127.0.0.1",
                "dashboard_address": None,
            }
        }
    return None


def task_runner_from_settings(env: Mapping[str, str] | None = None) -> TaskRunner[Any]:
    """A `DaskTaskRunner` when OOMRL_DASK_ADDRESS or OOMRL_DASK_WORKERS is set, else a thread
    pool."""
    env = get_settings().runtime.dask_env() if env is None else env
    chosen = dask_settings(env)
    if chosen is None:
        threads = env.get(THREADS_ENV, "").strip()
        return ThreadPoolTaskRunner(
            max_workers=_positive_int(THREADS_ENV, threads) if threads else None
        )
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:
        raise RuntimeError(
            "Dask is configured (OOMRL_DASK_*) but prefect-dask is not installed: "
            "pip install 'oomrl[dask]'"
        ) from exc
    return DaskTaskRunner(**chosen)
