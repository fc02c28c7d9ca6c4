"""The replay flow: paper-trade strategies over stored data and publish the comparison (one task
each)."""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow

from oomrl.build_info import flow_version
from tasks.expected_ends import configure_flow_logging
from tasks.portfolio import publish_replay_artifact, replay_strategy

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs


@flow(name="replay", version=FLOW_VERSION, retries=1, retry_delay_seconds=30, log_prints=True)
def replay_flow(
    strategies: list[str],
    start: date,
    end: date,
    params: dict[str, dict[str, Any]] | None = None,
    workspace: str | None = None,
    home: str | None = None,
) -> list[dict[str, Any]]:
    """One replay task per strategy (never one per day); `params` maps strategy name to its
    params."""
    futures = [
        replay_strategy.submit(name, start, end, (params or {}).get(name), workspace, home)
        for name in strategies
    ]
    summaries = [future.result() for future in futures]
    publish_replay_artifact(summaries)
    for summary in summaries:
        print(summary)
    return summaries
