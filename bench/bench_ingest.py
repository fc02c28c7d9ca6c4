"""W3 (docs/bench.md): ingest a synthetic 5,000 x 2,500 panel, read the close panel back, print
rows/s and peak RSS."""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oomrl.data.ingest import ingest
from oomrl.data.sources.synthetic import SyntheticSource
from oomrl.data.store import MarketStore


class TimedSource(SyntheticSource):
    """The synthetic source, timing its own bar generation so store + validation can be reported
    apart."""

    generating = 0.0

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        began = time.perf_counter()
        try:
            return super().bars(symbol, start, end)
        finally:
            TimedSource.generating += time.perf_counter() - began


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def single_file_read(store: MarketStore, scratch: Path) -> tuple[float, float]:
    """The alternative layout: one parquet for all years. Returns (write s, close-panel read s)."""
    tables = [pq.read_table(path) for path in store.bar_files()]
    began = time.perf_counter()
    pq.write_table(pa.concat_tables(tables), scratch / "all.parquet", compression="zstd")
    written = time.perf_counter() - began
    del tables
    began = time.perf_counter()
    long = pq.read_table(scratch / "all.parquet", columns=["date", "symbol", "close"]).to_pandas()
    dates, date_index = pd.factorize(long["date"], sort=True)
    syms, sym_index = pd.factorize(long["symbol"], sort=True)
    grid = np.full((len(date_index), len(sym_index)), np.nan)
    grid[dates, syms] = long["close"].to_numpy()
    return written, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--symbols", type=int, default=5000)
    parser.add_argument("--days", type=int, default=2500)
    parser.add_argument("--keep", action="store_true", help="keep the store folder")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="oomrl-bench-ingest-"))
    try:
        source = TimedSource(symbols=args.symbols, start="2016-01-04", days=args.days)
        store = MarketStore(scratch / "data")
        began = time.perf_counter()
        report = ingest(source, "all", None, None, store)
        ingest_s = time.perf_counter() - began
        rows, store_s = report.rows_fetched, ingest_s - TimedSource.generating
        print(
            f"W3 ingest: {args.symbols} symbols x {args.days} days = {rows:,} rows "
            f"({len(report.quarantined)} quarantined, {report.rows_written:,} stored)",
            flush=True,
        )
        print(f"  ingest total           {ingest_s:8.1f} s   {rows / ingest_s:12,.0f} rows/s")
        print(f"    synthetic generation {TimedSource.generating:8.1f} s")
        print(f"    validate + store     {store_s:8.1f} s   {rows / store_s:12,.0f} rows/s")
        print(f"  peak RSS after ingest  {peak_rss_mb():8.0f} MiB", flush=True)

        for attempt in ("first", "again"):
            began = time.perf_counter()
            panel = store.read_panel("close")
            read_s = time.perf_counter() - began
            print(
                f"  read close panel {attempt:5} {read_s:8.2f} s   shape {panel.shape[0]} "
                f"x {panel.shape[1]}, "
                f"{int(panel.notna().sum().sum()):,} values",
                flush=True,
            )
            del panel
        size_mb = sum(path.stat().st_size for path in store.bar_files()) / 2**20
        print(
            f"  store on disk          {size_mb:8.1f} MiB  ({len(store.bar_files())} part "
            "files, zstd)"
        )
        single_write_s, single_read_s = single_file_read(store, scratch)
        print(
            f"  single-file layout     write {single_write_s:.1f} s, close-panel read "
            f"{single_read_s:.2f} s "
            "(for comparison)",
            flush=True,
        )

        generated = TimedSource.generating
        began = time.perf_counter()
        again = ingest(source, "all", source.dates[-5], source.dates[-1], store)
        reingest_s = time.perf_counter() - began - (TimedSource.generating - generated)
        print(
            f"  re-ingest last 5 days  {reingest_s:8.1f} s   excluding generation "
            f"({again.rows_written} new rows: no duplicates)"
        )
        print(f"  peak RSS overall       {peak_rss_mb():8.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
