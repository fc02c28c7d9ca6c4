"""Market data: sources, validation and the parquet store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.data.catalog import CATALOG_FILE
    from oomrl.data.ingest import IngestReport, resolve_range, resolve_universe
    from oomrl.data.lock import DEFAULT_WAIT_S, HOLDER_FILE, LOCK_FILE
    from oomrl.data.sample import ensure_sample
    from oomrl.data.sample_clock import DAY_ONE, clock_end, clocked_end, next_session
    from oomrl.data.schema import (
        BAR_COLUMNS,
        BENCHMARK_CODE,
        conform_bars,
        from_yyyymmdd,
        with_prev_close,
    )
    from oomrl.data.store import MarketStore
    from oomrl.data.validation import validate_bars, validate_index, validate_membership

__all__ = [
    "BAR_COLUMNS",
    "BENCHMARK_CODE",
    "CATALOG_FILE",
    "DAY_ONE",
    "DEFAULT_WAIT_S",
    "HOLDER_FILE",
    "LOCK_FILE",
    "IngestReport",
    "MarketStore",
    "clock_end",
    "clocked_end",
    "conform_bars",
    "ensure_sample",
    "from_yyyymmdd",
    "next_session",
    "resolve_range",
    "resolve_universe",
    "validate_bars",
    "validate_index",
    "validate_membership",
    "with_prev_close",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)
