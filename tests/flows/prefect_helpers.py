"""Test helpers that read back what flows published on the Prefect harness: artifacts and events."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def artifact_keys(prefix: str) -> set[str]:
    """Keys of the stored artifacts that start with `prefix`."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return {a.key for a in client.read_artifacts() if a.key and a.key.startswith(prefix)}


def account_events(name: str, account: str, wait_s: float = 30.0, where: Any = None) -> list[Any]:
    """Events called `name` about `oomrl.account.<account>` (those `where(event)` holds for, when
    given; the session's harness keeps other tests' events), waiting up to `wait_s` for the
    first."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=10)
    query = EventFilter(
        event=EventNameFilter(name=[name]),
        resource=EventResourceFilter(id=[f"oomrl.account.{account}"]),
    )
    deadline = time.monotonic() + wait_s
    with get_client(sync_client=True) as client:
        while True:
            events = [
                e
                for e in client.read_events(filter=query, limit=50).events
                if where is None or where(e)
            ]
            if events or time.monotonic() > deadline:
                return list(events)
            time.sleep(0.5)


def read_artifact(key: str) -> Any:
    """The latest data of an artifact by key (tables come back as JSON text)."""
    import json

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_latest_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    data = artifact.data
    return json.loads(data) if isinstance(data, str) and data.startswith("[") else data


def paused_run(flow_name: str, wait_s: float = 60.0) -> Any:
    """The first run of flow `flow_name` that is Paused (waiting for its form), waiting up to
    `wait_s`."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateName,
    )

    deadline = time.monotonic() + wait_s
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(name=FlowRunFilterStateName(any_=["Paused"]))
                ),
            )
            if runs:
                return runs[0]
            time.sleep(0.5)
    raise AssertionError(f"no {flow_name} run paused for its form within {wait_s:.0f} s")


@contextmanager
def flow_run_messages() -> Iterator[list[str]]:
    """The messages (INFO and up) flow runs log through `get_run_logger` while the block runs."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger, handler = logging.getLogger("prefect.flow_runs"), Keep()
    level = logger.level  # the suite runs Prefect at WARNING (tests/conftest.py)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
