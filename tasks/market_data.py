"""Prefect tasks for market data: per-symbol fetch, reference data, batch store.

The fetch retries with backoff and jitter, and is cached.
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import lru_cache
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.context import TaskRunContext
from prefect.states import State
from prefect.tasks import Task, exponential_backoff

from oomrl.data import ingest as domain
from oomrl.data.sources import MarketSource, get_source
from oomrl.data.store import MarketStore
from oomrl.errors import OomrlError, SourceUnavailableError

FETCH_RETRIES = 3
BACKOFF_SECONDS = 2.0  # 2 s, 4 s, 8 s between attempts
JITTER_FACTOR = 0.5  # each delay is stretched by up to 50 % at random, so retries do not stampede
CACHE_FOR = timedelta(hours=12)


@lru_cache(maxsize=8)
def source_for(spec: str) -> MarketSource:
    """One source object per spec and process (the sample source loads its files once)."""
    return get_source(spec)


def network_error_only(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry transport failures (SourceUnavailableError); malformed data would fail the same way
    again."""
    return isinstance(state.result(raise_on_failure=False), SourceUnavailableError)


def fetch_cache_key(context: TaskRunContext, parameters: dict[str, Any]) -> str:
    """Cache by source + symbol + range: the same request within CACHE_FOR reuses the stored
    frame."""
    return ":".join(
        ["bars", *(str(parameters[key]) for key in ("source", "symbol", "start", "end"))]
    )


@task(
    name="fetch-symbol-bars",
    retries=FETCH_RETRIES,
    retry_delay_seconds=exponential_backoff(BACKOFF_SECONDS),
    retry_jitter_factor=JITTER_FACTOR,
    retry_condition_fn=network_error_only,
    cache_key_fn=fetch_cache_key,
    cache_expiration=CACHE_FOR,
    persist_result=True,
    task_run_name="fetch-{symbol}",
)
def fetch_symbol_bars(source: str, symbol: str, start: date, end: date) -> pd.DataFrame:
    """One symbol's bars from `source` in schema form."""
    return domain.fetch_bars(source_for(source), symbol, start, end)


# An offline source reads local files: there is no network to retry.
# One task run per symbol would be hundreds of task runs per ingest.
# Each is a few API writes.
# A SQLite Prefect server serialises them.
@task(name="fetch-offline-bars", cache_policy=NO_CACHE, persist_result=False)
def fetch_offline_bars(
    source: str, symbols: list[str], start: date, end: date
) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """Every symbol's bars from an offline source, in one task.

    Returns the frames, and why a symbol failed.
    """
    frames: dict[str, pd.DataFrame] = {}
    failures: dict[str, str] = {}
    for symbol in symbols:
        try:
            frames[symbol] = domain.fetch_bars(source_for(source), symbol, start, end)
        except OomrlError as exc:  # a malformed file of one symbol: the others are stored
            failures[symbol] = str(exc)
    return frames, failures


# The writing tasks take the flow's open store transaction and are never cached.
# A cached result would skip its write in a retried flow run's new transaction.
@task(
    name="load-reference-data",
    retries=FETCH_RETRIES,
    retry_delay_seconds=exponential_backoff(BACKOFF_SECONDS),
    retry_jitter_factor=JITTER_FACTOR,
    retry_condition_fn=network_error_only,
    cache_policy=NO_CACHE,
)
def load_reference_data(
    source: str, start: date, end: date, store: MarketStore
) -> tuple[int, int, pd.DataFrame]:
    """Benchmark levels and membership into the store transaction (a missing benchmark fails the
    flow)."""
    return domain.load_reference(source_for(source), start, end, store)


@task(name="validate-and-store", cache_policy=NO_CACHE)
def validate_and_store(
    frames: list[pd.DataFrame], store: MarketStore
) -> tuple[int, int, pd.DataFrame]:
    """Validate a batch of bar frames and stage the valid rows.

    Returns (rows in, rows added, quarantined).
    """
    return domain.store_batch(frames, store)
