"""The ingest flow: reference data, per-symbol fetch mapped over the universe, validation and
storage, artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast
from uuid import UUID

import pandas as pd
from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import (
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.tasks import exponential_backoff

from oomrl.build_info import flow_version
from oomrl.data import ingest as domain
from oomrl.data.sample_clock import clocked_end
from oomrl.data.store import MarketStore
from oomrl.errors import SourceUnavailableError
from oomrl.settings import settings_for
from tasks.expected_ends import configure_flow_logging
from tasks.market_data import (
    BACKOFF_SECONDS,
    fetch_offline_bars,
    fetch_symbol_bars,
    load_reference_data,
    source_for,
    validate_and_store,
)
from tasks.runners import task_runner_from_settings

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs
QUARANTINE_ROWS_SHOWN = 200


def publish_report(report: domain.IngestReport) -> None:
    """Table artifacts: a one-row summary and the quarantined rows with their reasons."""
    summary = report.summary()
    create_table_artifact(
        [{key: str(value) for key, value in summary.items() if key != "stored"}],
        key="ingest-summary",
        description=("STALE: " + str(report.stale_reason))
        if report.stale
        else f"ingest from {report.source}",
    )
    rows = [
        {
            "date": f"{row.date:%Y-%m-%d}" if row.date == row.date else "?",
            "symbol": str(row.symbol),
            "reason": str(row.reason),
        }
        for row in report.quarantined.head(QUARANTINE_ROWS_SHOWN).itertuples()
    ]
    rows += [
        {
            "date": f"{row.date:%Y-%m-%d}" if row.date == row.date else "?",
            "symbol": f"index {row.code}",
            "reason": str(row.reason),
        }
        for row in report.index_quarantined.itertuples()
    ]
    rows += [
        {"date": "", "symbol": symbol, "reason": f"fetch failed: {error}"}
        for symbol, error in report.failures.items()
    ]
    create_table_artifact(
        rows or [{"date": "", "symbol": "", "reason": "no rows quarantined"}],
        key="ingest-quarantine",
        description=f"{len(report.quarantined)} bar rows quarantined",
    )


# Per-symbol fetches of a live source fan out on Dask when OOMRL_DASK_* is set (tasks/runners.py).
# Otherwise they fan out on threads. An offline source (the sample, csv, synthetic) is read in one
# task per batch. retries=0: bad data fails the same way again. The fetch tasks retry an
# unreachable source with backoff.
@flow(
    name="ingest-market-data",
    version=FLOW_VERSION,
    retries=0,
    log_prints=True,
    task_runner=task_runner_from_settings(),
)
def ingest_market_data(
    source: str = "sample",
    universe: str = "csi300",
    start: str | None = None,
    end: str | None = None,
    home: str | None = None,
    batch_symbols: int = domain.BATCH_SYMBOLS,
    backoff_seconds: float = BACKOFF_SECONDS,
) -> dict[str, Any]:
    """Ingest bars of `universe` for [start, end] from `source` into OOMRL_HOME/data.

    With `home` set, the bars go into `home`/data.

    A live source that cannot be reached leaves the store as it was. The result says `stale`.

    Args:
        source: Where bars come from. `sample` is the bundled data, offline. `akshare` or
            `yfinance` are live. `csv:/folder` is CSV files on the worker.
        universe: Which symbols. `csi300` is the index members over the range. `all` is what an
            offline source holds. Or a comma-separated list of codes (600519,000001).
        start: First date to ingest, YYYY-MM-DD. Empty: the start of the source's data, or
            2024-01-01 for a live source.
        end: Last date to ingest, YYYY-MM-DD. Empty: the end of the source's data, or today for a
            live source. With OOMRL_SAMPLE_CLOCK, the sample's next session after the store's last.
        home: Internal: OOMRL_HOME on the worker (folder). Leave empty to use the worker's setting.
        batch_symbols: Symbols fetched and stored per batch (count); smaller batches use less
            memory.
        backoff_seconds: First wait before retrying an unreachable source, in seconds (doubles on
            each retry).
    """
    logger = get_run_logger()
    settings = settings_for(home)
    root = Path(settings.store.data_dir)
    store = MarketStore(root)
    # With OOMRL_SAMPLE_CLOCK, an ingest of the sample without `end` adds the next session only.
    lo, hi = domain.resolve_range(
        source_for(source),
        start,
        clocked_end(source_for(source), end, settings.store.sample_clock, store),
    )
    report = domain.IngestReport(source=source, universe=universe, start=lo, end=hi)
    # sync in a sync flow: Prefect types the call as either, so say which
    progress = cast(
        UUID,
        create_progress_artifact(
            0.0, key="ingest-progress", description=f"ingest {source} {lo}..{hi}"
        ),
    )

    backoff = exponential_backoff(backoff_seconds)
    # One store transaction for the whole run.
    # Its writes commit together at the end, or not at all.
    with store.transaction() as tx:
        report.recovered = tx.recovery_note()
        try:
            report.index_rows, report.membership_rows, report.index_quarantined = (
                load_reference_data.with_options(retry_delay_seconds=backoff)(source, lo, hi, tx)
            )
        except SourceUnavailableError as exc:
            report = domain.fall_back_to_store(report, tx, exc)
            logger.warning(
                "source %s unreachable; using the stored data, which is stale: %s",
                source,
                report.stale_reason,
            )
            publish_report(report)
            update_progress_artifact(progress, 100.0)
            return report.summary()

        report.symbols = domain.resolve_universe(universe, source_for(source), tx, lo, hi)
        fetch = fetch_symbol_bars.with_options(retry_delay_seconds=backoff)
        quarantined: list[pd.DataFrame] = []
        for first in range(0, len(report.symbols), batch_symbols):
            symbols = report.symbols[first : first + batch_symbols]
            fetched: dict[str, pd.DataFrame] = {}
            if source_for(source).live:  # one task per symbol: each retries the network on its own
                futures = fetch.map(unmapped(source), symbols, unmapped(lo), unmapped(hi))
                for symbol, future in zip(symbols, futures, strict=True):
                    future.wait()
                    if future.state.is_failed():
                        report.failures[symbol] = str(future.result(raise_on_failure=False))
                    else:
                        fetched[symbol] = future.result()
            else:  # files on this machine: one task per batch, not hundreds of task runs on the API
                fetched, failed = fetch_offline_bars(source, symbols, lo, hi)
                report.failures.update(failed)
            report.symbols_without_data += [
                symbol for symbol, frame in fetched.items() if frame.empty
            ]
            frames = list(fetched.values())
            rows, written, bad = validate_and_store(frames, tx)
            report.rows_fetched += rows
            report.rows_written += written
            quarantined += [bad] if len(bad) else []
            update_progress_artifact(progress, 100.0 * (first + len(symbols)) / len(report.symbols))

        report = domain.finish(report, tx, quarantined)
    if report.stale:
        logger.warning(
            "every fetch from %s failed; the store is unchanged and stale: %s",
            source,
            report.stale_reason,
        )
    publish_report(report)
    return report.summary()
