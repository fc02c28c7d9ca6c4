"""Tag the running flow run with the alert behind a repair and the strategy version.

Its existing tags are kept.
"""

from __future__ import annotations

from prefect import runtime, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client


@task(name="tag-flow-run", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def add_run_tags(tags: list[str]) -> list[str]:
    """Add `tags` to the current flow run; returns the run's tags afterwards."""
    run_id = runtime.flow_run.id
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(run_id).tags if run_id else []
        merged = sorted(set(current or []) | set(tags))
        if run_id:
            client.update_flow_run(run_id, tags=merged)
    return merged
