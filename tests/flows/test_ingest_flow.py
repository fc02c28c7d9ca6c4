"""The ingest flow under the session Prefect harness: artifacts, retries with backoff, stale
fallback, failures."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any
from uuid import UUID

import pandas as pd
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
)
from prefect.states import Failed

from flows.ingest import FLOW_VERSION, ingest_market_data
from oomrl.data import sources
from oomrl.data.sources.synthetic import SyntheticSource
from oomrl.errors import DataValidationError, SourceUnavailableError
from tasks import market_data
from tasks.market_data import fetch_symbol_bars, network_error_only
from tests.conftest import FIXTURES

MAPPED = FIXTURES / "data" / "csv_mapped"


class Flaky(SyntheticSource):
    """Live source: bars fail `failures` times per symbol, then succeed; reference data may be
    down."""

    name = "flaky"
    live = True

    def __init__(self, failures: int = 0, reference_down: bool = False) -> None:
        super().__init__(symbols=3, start="2024-07-01", days=10)
        self.failures, self.reference_down, self.calls = failures, reference_down, {}

    def coverage(self) -> None:
        return None

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        if self.reference_down:
            raise SourceUnavailableError("flaky: connection reset")
        return super().index_levels(code, kind, start, end)

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        self.calls[symbol] = self.calls.get(symbol, 0) + 1
        if self.calls[symbol] <= self.failures:
            raise SourceUnavailableError(f"flaky: timeout on {symbol}")
        return super().bars(symbol, start, end)


@pytest.fixture()
def flaky(monkeypatch: pytest.MonkeyPatch) -> dict[str, Flaky]:
    """Register `flaky:<name>` specs; each name is one Flaky instance (distinct names avoid cache
    hits)."""
    made: dict[str, Flaky] = {}

    def factory(arg: str | None) -> Flaky:
        failures, _, down = (arg or "0").partition("-")
        made[arg or ""] = Flaky(failures=int(failures.split(".")[0]), reference_down=down == "down")
        return made[arg or ""]

    monkeypatch.setitem(sources.SOURCES, "flaky", factory)
    market_data.source_for.cache_clear()
    return made


def _artifacts(flow_run_id: UUID) -> dict[str, Any]:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {artifact.key: artifact for artifact in found}


def test_flow_and_fetch_task_declare_retries_and_version() -> None:
    # the flow never retries as a whole (bad data fails the same way again); the fetches retry the
    # network
    assert ingest_market_data.version == FLOW_VERSION and ingest_market_data.retries == 0
    assert fetch_symbol_bars.retries == 3 and fetch_symbol_bars.retry_jitter_factor == 0.5
    assert fetch_symbol_bars.retry_delay_seconds == [2.0, 4.0, 8.0]
    assert fetch_symbol_bars.retry_condition_fn is network_error_only


def test_only_network_errors_are_retried() -> None:
    assert network_error_only(fetch_symbol_bars, None, Failed(data=SourceUnavailableError("down")))  # type: ignore[arg-type]
    assert not network_error_only(fetch_symbol_bars, None, Failed(data=DataValidationError("bad")))  # type: ignore[arg-type]
    assert not network_error_only(fetch_symbol_bars, None, Failed(data=None))  # type: ignore[arg-type]


def test_sample_ingest_publishes_tables_and_progress(prefect_harness: None, tmp_path: Path) -> None:
    state = ingest_market_data(
        source="sample",
        universe="600519,300750,000001,600837",
        start="2025-01-01",
        end="2025-01-31",
        home=str(tmp_path),
        return_state=True,
    )
    summary = state.result()
    # 600837: no panel has it
    assert summary["symbols"] == 4 and summary["symbols_without_data"] == 1
    assert summary["rows_written"] == summary["rows_fetched"] > 0
    assert summary["quarantined_rows"] == 0 and not summary["stale"]
    artifacts = _artifacts(state.state_details.flow_run_id)
    assert {"ingest-summary", "ingest-quarantine", "ingest-progress"} <= set(artifacts)
    assert artifacts["ingest-progress"].data == 100.0
    assert '"rows_written": "' in artifacts["ingest-summary"].data
    # The files are read in one task, not one per symbol
    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
            )
        )
    assert [run.name.rsplit("-", 1)[0] for run in runs if run.name.startswith("fetch")] == [
        "fetch-offline-bars"
    ]
    again = ingest_market_data(
        source="sample",
        universe="600519,300750,000001",
        start="2025-01-01",
        end="2025-01-31",
        home=str(tmp_path),
    )
    assert again["rows_written"] == 0


def test_quarantined_rows_and_reasons_reach_the_artifact(
    prefect_harness: None, tmp_path: Path
) -> None:
    state = ingest_market_data(
        source=f"csv:{MAPPED}",
        universe="600519",
        home=str(tmp_path),
        batch_symbols=1,
        return_state=True,
    )
    summary = state.result()
    assert summary["quarantined_rows"] == 2 and summary["rows_written"] == 4
    table = _artifacts(state.state_details.flow_run_id)["ingest-quarantine"].data
    assert "high_below_low" in table and "non_session" in table


def test_network_errors_are_retried_with_backoff(
    prefect_harness: None, tmp_path: Path, flaky: dict[str, Flaky]
) -> None:
    summary = ingest_market_data(
        source="flaky:2",
        universe="all",
        start="2024-07-01",
        end="2024-07-12",
        home=str(tmp_path),
        backoff_seconds=0.0,
    )
    assert summary["failures"] == 0 and summary["rows_written"] > 0
    assert set(flaky["2"].calls.values()) == {3}  # two timeouts, then success, for every symbol


def test_a_symbol_that_keeps_failing_is_reported(
    prefect_harness: None, tmp_path: Path, flaky: dict[str, Flaky]
) -> None:
    ingest_market_data(
        source="sample", universe="600519", start="2025-01-02", end="2025-01-10", home=str(tmp_path)
    )
    summary = ingest_market_data(
        source="flaky:9",
        universe="all",
        start="2024-07-01",
        end="2024-07-12",
        home=str(tmp_path),
        backoff_seconds=0.0,
    )
    assert summary["failures"] == 3 and summary["stale"]
    assert set(flaky["9"].calls.values()) == {4}  # 1 attempt + 3 retries


def test_unreachable_source_falls_back_to_stale_store(
    prefect_harness: None, tmp_path: Path, flaky: dict[str, Flaky]
) -> None:
    ingest_market_data(
        source="sample", universe="600519", start="2025-01-02", end="2025-01-10", home=str(tmp_path)
    )
    state = ingest_market_data(
        source="flaky:0-down",
        universe="all",
        start="2025-01-02",
        end="2025-01-20",
        home=str(tmp_path),
        backoff_seconds=0.0,
        return_state=True,
    )
    summary = state.result()
    assert summary["stale"] and "connection reset" in summary["stale_reason"]
    assert "last bar 2025-01-10" in summary["stale_reason"]
    summary_artifact = _artifacts(state.state_details.flow_run_id)["ingest-summary"]
    assert summary_artifact.description.startswith("STALE")


def test_missing_benchmark_fails_the_flow(prefect_harness: None, tmp_path: Path) -> None:
    folder = tmp_path / "no-index"
    folder.mkdir()
    for name in ("600519.csv", "source.toml"):
        (folder / name).write_text((MAPPED / name).read_text())
    with pytest.raises(DataValidationError, match="missing benchmark"):
        ingest_market_data(source=f"csv:{folder}", universe="all", home=str(tmp_path))


@pytest.mark.dask
def test_ingest_fans_out_on_a_two_worker_dask_cluster(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from tasks.runners import task_runner_from_settings

    runner = task_runner_from_settings({"OOMRL_DASK_WORKERS": "2", "OOMRL_DASK_PROCESSES": "0"})
    assert isinstance(runner, DaskTaskRunner)
    summary = ingest_market_data.with_options(task_runner=runner)(
        source="sample",
        universe="600519,000001,601318",
        start="2025-01-01",
        end="2025-01-31",
        home=str(tmp_path),
    )
    assert summary["symbols"] == 3 and summary["rows_written"] == summary["rows_fetched"] > 40
    assert summary["quarantined_rows"] == 0 and not summary["failures"]
