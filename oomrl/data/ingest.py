"""Ingestion: fetch benchmark, membership and bars from a source; validate; quarantine; store.

Bad rows are quarantined; the rest is stored."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, cast

import pandas as pd

from oomrl.data.schema import BAR_COLUMNS, BENCHMARK_CODE, INDEX_COLUMNS, conform_bars
from oomrl.data.sources import MarketSource
from oomrl.data.store import MarketStore, StoreTransaction
from oomrl.data.validation import count_reasons, validate_bars, validate_index
from oomrl.errors import (
    DataValidationError,
    MissingBenchmarkError,
    OomrlError,
    SourceUnavailableError,
)
from oomrl.market.markets import get_market, normalize
from oomrl.market.universe import members_between

logger = logging.getLogger(__name__)
Progress = Callable[[int, int, str], None]
"""progress(done, total, symbol) after each symbol is fetched."""
BATCH_SYMBOLS = 500
"""Symbols validated and written together: bounds memory on big universes, few rewrites of year
files."""


@dataclass
class IngestReport:
    """What an ingestion did. `stale` says the store was not refreshed: the source was
    unreachable."""

    source: str
    universe: str
    start: date
    end: date
    symbols: list[str] = field(default_factory=list)
    symbols_without_data: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    rows_fetched: int = 0
    rows_written: int = 0
    index_rows: int = 0
    membership_rows: int = 0
    quarantined: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=[*BAR_COLUMNS, "reason"])
    )
    index_quarantined: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=[*INDEX_COLUMNS, "reason"])
    )
    stale: bool = False
    stale_reason: str | None = None
    stored: dict[str, Any] = field(default_factory=dict)
    recovered: str | None = None
    """What the store's start-up check cleared of an earlier write that did not finish (None:
    nothing)."""
    ingest_id: str | None = None
    """The id of this ingest's record in the store (its quarantined rows are kept under it)."""

    @property
    def quarantine_reasons(self) -> dict[str, int]:
        """Quarantined rows (bars and index levels) per rule."""
        return count_reasons(
            pd.concat([self.quarantined[["reason"]], self.index_quarantined[["reason"]]])
        )

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly summary (for the CLI, artifacts and the store manifest)."""
        return {
            "source": self.source,
            "universe": self.universe,
            "start": str(self.start),
            "end": str(self.end),
            "symbols": len(self.symbols),
            "symbols_without_data": len(self.symbols_without_data),
            "failures": len(self.failures),
            "rows_fetched": self.rows_fetched,
            "rows_written": self.rows_written,
            "index_rows": self.index_rows,
            "membership_rows": self.membership_rows,
            "quarantined_rows": len(self.quarantined),
            "index_quarantined_rows": len(self.index_quarantined),
            "quarantine_reasons": self.quarantine_reasons,
            "stale": self.stale,
            "stale_reason": self.stale_reason,
            "recovered": self.recovered,
            "ingest_id": self.ingest_id,
            "stored": {key: str(value) for key, value in self.stored.items()},
        }


def _day(value: Any, what: str) -> date:
    """A date given as a date or text (flow parameters are text). Otherwise a clear error naming
    it."""
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        stamp = pd.NaT
    if pd.isna(stamp):
        raise OomrlError(f"{what} {value!r} is not a date (YYYY-MM-DD)")
    return cast(date, stamp.date())


def resolve_range(source: MarketSource, start: Any, end: Any) -> tuple[date, date]:
    """The ingest range: explicit dates, else what an offline source holds, else
    2024-01-01..today."""
    coverage = source.coverage()
    lo = _day(start, "start") if start else (coverage[0] if coverage else date(2024, 1, 1))
    hi = _day(end, "end") if end else (coverage[1] if coverage else date.today())
    if lo > hi:
        raise OomrlError(f"start {lo} is after end {hi}")
    return lo, hi


def load_reference(
    source: MarketSource,
    start: date,
    end: date,
    store: MarketStore,
    now: datetime | None = None,
    benchmark: str = BENCHMARK_CODE,
) -> tuple[int, int, pd.DataFrame]:
    """Fetch and store the benchmark levels and membership.

    Returns (index rows, membership rows, quarantined). The market's benchmark price index (CSI 300
    for A-shares) is required (MissingBenchmarkError). The total-return index is stored when the
    source has it.
    """
    frames = [source.index_levels(benchmark, "price", start, end)]
    if frames[0].empty:
        raise MissingBenchmarkError(
            f"source {source.name!r} has no {BENCHMARK_NAMES.get(benchmark, 'benchmark')} "
            f"({benchmark}) levels for "
            f"{start}..{end}: missing benchmark"
        )
    frames.append(source.index_levels(benchmark, "total_return", start, end))
    checked = validate_index(pd.concat(frames, ignore_index=True), now=now)
    valid = checked.valid
    # As good as a missing file
    if not ((valid["code"] == benchmark) & (valid["kind"] == "price")).any():
        reasons = ", ".join(f"{rule} {n}" for rule, n in count_reasons(checked.quarantined).items())
        example = checked.quarantined.iloc[0]
        raise MissingBenchmarkError(
            f"source {source.name!r} has no valid "
            f"{BENCHMARK_NAMES.get(benchmark, 'benchmark')} ({benchmark}) "
            f"level for {start}..{end}: every one of its {len(frames[0])} rows is invalid "
            f"({reasons}; e.g. "
            f"{str(example['date'])[:10]}: {example['reason']}): missing benchmark"
        )
    index_rows = store.write_index(valid)
    membership = source.membership()
    membership_rows = store.write_membership(membership) if len(membership) else 0
    return index_rows, membership_rows, checked.quarantined


BENCHMARK_NAMES = {"000300": "CSI 300", "^GSPC": "S&P 500", "^HSI": "Hang Seng"}


def benchmark_of(market: str) -> str:
    """The benchmark index code of a market (cn: 000300, us: ^GSPC, hk: ^HSI).

    Otherwise a clear error."""
    try:
        benchmark = get_market(market).benchmark
    except ValueError as exc:
        raise OomrlError(str(exc)) from exc
    assert benchmark is not None  # every named market has one
    return benchmark


def resolve_universe(
    universe: str,
    source: MarketSource,
    store: MarketStore,
    start: date,
    end: date,
    market: str = "cn",
) -> list[str]:
    """Symbols to fetch: `csi300`, `all`, or a list of the market's symbols.

    `csi300` is every PIT member in the range; `all` is what an offline source has. A list reads
    `600519,000001` for cn, `AAPL,MSFT` for us, `0700.HK` for hk."""
    name = universe.strip().lower()
    if name == "csi300" and market != "cn":
        raise OomrlError(
            f"--universe csi300 is an A-share universe; name the {market} symbols instead"
        )
    if name == "csi300":
        membership = store.read_membership()
        symbols = members_between(membership, start, end)
        if not symbols and len(membership):
            # Only a later snapshot is known (a live source gives today's list). Use the earliest
            # one rather than nothing; it carries survivorship bias for past ranges.
            first = membership["effective_date"].min()
            symbols = sorted(membership.loc[membership["effective_date"] == first, "symbol"])
        if not symbols:
            raise OomrlError(
                f"no CSI 300 membership for {start}..{end} from source {source.name!r} or the store"
            )
        return symbols
    if name == "all":
        lister = getattr(source, "symbols", None)
        if lister is None:
            raise OomrlError(
                f"source {source.name!r} cannot list its symbols; name them or use "
                "--universe csi300"
            )
        return list(lister())
    try:
        symbols = sorted({normalize(part, market) for part in universe.split(",") if part.strip()})
    except ValueError as exc:
        raise OomrlError(f"--universe for market {market}: {exc}") from exc
    if not symbols:  # an empty name must not pass for "nothing to do"
        raise OomrlError(
            f"--universe {universe!r} names no symbols: give csi300, all, or a comma list of codes"
        )
    return symbols


def fetch_bars(source: MarketSource, symbol: str, start: date, end: date) -> pd.DataFrame:
    """One symbol's bars in schema form.

    A source returning malformed frames fails here, naming the symbol."""
    frame = source.bars(symbol, start, end)
    try:
        return conform_bars(frame)
    except DataValidationError as exc:
        raise DataValidationError(f"{source.name} bars for {symbol}: {exc}") from exc


def store_batch(
    frames: Iterable[pd.DataFrame], store: MarketStore, now: datetime | None = None
) -> tuple[int, int, pd.DataFrame]:
    """Validate a batch of bar frames (as of `now`) and store the valid rows.

    Returns (rows in, rows added, quarantined)."""
    parts = [frame for frame in frames if len(frame)]
    if not parts:
        return 0, 0, pd.DataFrame(columns=[*BAR_COLUMNS, "reason"])
    batch = pd.concat(parts, ignore_index=True)
    checked = validate_bars(batch, now=now)
    written = store.write_bars(checked.valid) if len(checked.valid) else 0
    return len(batch), written, checked.quarantined


def fall_back_to_store(report: IngestReport, store: MarketStore, error: Exception) -> IngestReport:
    """Keep what the store has, flagged stale. An open transaction is discarded, so nothing of
    this ingest is kept. With nothing stored there is nothing to fall back to."""
    if isinstance(store, StoreTransaction):
        store.discard()
    committed = MarketStore(store.root)
    summary = committed.bar_summary()
    if committed.is_empty():
        logger.warning(
            "%s unreachable (%s) and the store is empty: nothing ingested", report.source, error
        )
        raise SourceUnavailableError(
            f"{report.source} is unreachable ({error}) and the store is empty"
        ) from error
    report.stale = True
    report.stale_reason = (
        f"{report.source} unreachable ({error}); kept the stored data, last bar "
        f"{summary['last_date']:%Y-%m-%d}"
        if summary["last_date"] is not None
        else f"{report.source} unreachable ({error}); kept the stored data"
    )
    report.stored = summary
    logger.warning("ingest kept the stored data (stale): %s", report.stale_reason)
    return report


def ingest(
    source: MarketSource,
    universe: str,
    start: Any,
    end: Any,
    store: MarketStore,
    progress: Progress | None = None,
    *,
    wait: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    now: datetime | None = None,
    market: str = "cn",
) -> IngestReport:
    """Ingest `universe` bars for [start, end] from `source` into `store`, as one transaction.

    Bad rows are quarantined, including bars after the last completed session as of `now`. They are
    kept with their reasons in the report and on disk, never stored as bars. A missing benchmark
    fails the ingestion. A live source may be unreachable. Then the report is flagged stale and the
    store is left as it was. Any failure leaves the store as it was. A second writer waits up to
    `wait` s for the store's lock.
    """
    lo, hi = resolve_range(source, start, end)
    report = IngestReport(source=source.name, universe=universe, start=lo, end=hi)
    with store.transaction(wait, on_wait) as tx:
        report.recovered = tx.recovery_note()
        try:
            report.index_rows, report.membership_rows, report.index_quarantined = load_reference(
                source, lo, hi, tx, now, benchmark_of(market)
            )
        except SourceUnavailableError as exc:
            return fall_back_to_store(report, tx, exc)
        report.symbols = resolve_universe(universe, source, tx, lo, hi, market)
        quarantined: list[pd.DataFrame] = []
        batch: list[pd.DataFrame] = []
        for done, symbol in enumerate(report.symbols, start=1):
            try:
                frame = fetch_bars(source, symbol, lo, hi)
            except SourceUnavailableError as exc:
                report.failures[symbol] = str(exc)
                frame = pd.DataFrame()
            if frame.empty and symbol not in report.failures:
                report.symbols_without_data.append(symbol)
            batch.append(frame)
            if len(batch) >= BATCH_SYMBOLS or done == len(report.symbols):
                rows, written, bad = store_batch(batch, tx, now)
                report.rows_fetched += rows
                report.rows_written += written
                if len(bad):
                    quarantined.append(bad)
                batch = []
            if progress:
                progress(done, len(report.symbols), symbol)
        return finish(report, tx, quarantined)


def finish(
    report: IngestReport, store: MarketStore, quarantined: list[pd.DataFrame]
) -> IngestReport:
    """Collect quarantined rows. When every symbol failed, fall back to the store (stale).

    Else record the ingest with its quarantined rows, in the same transaction as its data."""
    if quarantined:
        report.quarantined = pd.concat(quarantined, ignore_index=True)
    if report.symbols and len(report.failures) == len(report.symbols):
        return fall_back_to_store(
            report, store, SourceUnavailableError(next(iter(report.failures.values())))
        )
    report.stored = store.bar_summary()
    report.ingest_id = store.record_ingest(
        report.summary(), {"bars": report.quarantined, "index": report.index_quarantined}
    )
    logger.info(
        "ingest %s of %s %s..%s: %d bar rows stored of %d fetched, %d symbols without data, "
        "%d failed",
        report.ingest_id,
        report.source,
        report.start,
        report.end,
        report.rows_written,
        report.rows_fetched,
        len(report.symbols_without_data),
        len(report.failures),
    )
    if len(report.quarantined) or len(report.index_quarantined):
        logger.info(
            "ingest %s quarantined %d bar rows and %d index rows: %s",
            report.ingest_id,
            len(report.quarantined),
            len(report.index_quarantined),
            report.quarantine_reasons,
        )
    return report
