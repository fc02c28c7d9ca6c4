"""The parquet market store under OOMRL_HOME/data: bars by year, index levels, membership; atomic, incremental writes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oomrl.data.parts import BAR_KEY, YearPartition, atomic_write, write_parquet
from oomrl.data.schema import BAR_COLUMNS, MEMBERSHIP_COLUMNS, NANOS_PER_DAY, empty_bars
from oomrl.data.validation import validate_bars, validate_index, validate_membership
from oomrl.errors import DataValidationError

INDEX_KEY = ["date", "code", "kind"]


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    write_parquet(pa.Table.from_pandas(frame, preserve_index=False), path)


def _rejection(what: str, quarantined: pd.DataFrame) -> DataValidationError:
    first = quarantined.iloc[0]
    label = f"{first.get('symbol', first.get('code', ''))} {first['date']:%Y-%m-%d}" if pd.notna(first["date"]) else "?"
    return DataValidationError(
        f"refusing to store {what}: {len(quarantined)} row(s) fail validation, e.g. {label}: {first['reason']}"
    )


def _scatter(long: pd.DataFrame, field: str) -> pd.DataFrame:
    """Long (date, symbol, field) rows into a dense (date x symbol) frame with O(n) integer indexing.

    Far cheaper than DataFrame.pivot or sorting factorizations on millions of rows: dates become day
    offsets, symbols keep their dictionary codes, and only the few distinct values are sorted.
    """
    if long.empty:
        return pd.DataFrame(index=pd.DatetimeIndex([], name="date"), columns=pd.Index([], name="symbol"),
                            dtype="float64")
    symbol = long["symbol"].astype("category")
    names = np.asarray(symbol.cat.categories, dtype=object)
    codes = symbol.cat.codes.to_numpy()
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    ordered = used[np.argsort(names[used])]
    column_of = np.full(len(names), -1)
    column_of[ordered] = np.arange(len(ordered))
    day = long["date"].to_numpy().view("int64") // NANOS_PER_DAY
    offset = day - day.min()
    present = np.zeros(int(offset.max()) + 1, dtype=bool)
    present[offset] = True
    row_of = np.cumsum(present) - 1
    grid = np.full((int(present.sum()), len(ordered)), np.nan)
    grid[row_of[offset], column_of[codes]] = long[field].to_numpy(dtype=np.float64)
    dates = pd.to_datetime((np.flatnonzero(present) + day.min()) * NANOS_PER_DAY)
    return pd.DataFrame(grid, index=pd.DatetimeIndex(dates, name="date"),
                        columns=pd.Index(names[ordered], name="symbol"))


class MarketStore:
    """Bars, index levels and CSI 300 membership as parquet files under `root`.

    Bars are partitioned by calendar year (bars/YYYY/, see oomrl.data.parts): appending new days or new
    symbols adds a part file without rewriting stored ones, and a full panel read is a few scans per
    year. Every file write goes to a temp file then os.replace, so a crash leaves the previous state.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    # -- paths ---------------------------------------------------------------------------------
    @property
    def bars_dir(self) -> Path:
        return self.root / "bars"

    @property
    def index_path(self) -> Path:
        return self.root / "index.parquet"

    @property
    def membership_path(self) -> Path:
        return self.root / "membership.parquet"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def bar_files(self, start: pd.Timestamp | None = None, end: pd.Timestamp | None = None) -> list[Path]:
        """The live part files of the years overlapping [start, end]."""
        if not self.bars_dir.exists():
            return []
        lo = start.year if start is not None else 0
        hi = end.year if end is not None else 9999
        years = sorted(path for path in self.bars_dir.glob("[0-9][0-9][0-9][0-9]") if lo <= int(path.name) <= hi)
        return [file for year in years for file in YearPartition(year).files()]

    def is_empty(self) -> bool:
        """True when the store holds no bars and no benchmark levels."""
        return not self.bar_files() and not self.index_path.exists()

    # -- bars ----------------------------------------------------------------------------------
    def write_bars(self, frame: pd.DataFrame) -> int:
        """Merge validated bars in; returns the number of (date, symbol) rows that were not stored before.

        Refuses (DataValidationError) if any row fails validation: callers quarantine first. A row
        for an existing (date, symbol) replaces the stored one, so re-ingesting adds no duplicates.
        """
        result = validate_bars(frame)
        if len(result.quarantined):
            raise _rejection("bars", result.quarantined)
        bars = result.valid
        added = 0
        for year, part in bars.groupby(bars["date"].dt.year):
            added += YearPartition(self.bars_dir / str(int(year))).merge(part)
        return added

    def _read_bar_columns(
        self, columns: Sequence[str], start: Any, end: Any, symbols: Iterable[str] | None,
        categorical: bool = False,
    ) -> pd.DataFrame:
        lo = pd.Timestamp(start) if start is not None else None
        hi = pd.Timestamp(end) if end is not None else None
        filters: list[tuple[str, str, Any]] = []
        if lo is not None:
            filters.append(("date", ">=", lo))
        if hi is not None:
            filters.append(("date", "<=", hi))
        wanted = sorted(set(symbols)) if symbols is not None else None
        if wanted is not None:
            filters.append(("symbol", "in", wanted))
        # Symbols as a dictionary column: one string per symbol instead of one per row (12.5M rows -> 5k strings).
        tables = [pq.read_table(path, columns=list(columns), filters=filters or None,
                                read_dictionary=["symbol"] if categorical else None)
                  for path in self.bar_files(lo, hi)]
        if not tables:
            return empty_bars()[list(columns)]
        table = pa.concat_tables(tables)
        return (table.unify_dictionaries() if categorical else table).to_pandas()

    def read_bars(self, start: Any = None, end: Any = None, symbols: Iterable[str] | None = None) -> pd.DataFrame:
        """Long bars (BAR_COLUMNS) in [start, end] for the given symbols (all when None), sorted by date, symbol."""
        bars = self._read_bar_columns(BAR_COLUMNS, start, end, symbols)
        return bars.sort_values(BAR_KEY, kind="mergesort").reset_index(drop=True)

    def read_panel(
        self, field: str, start: Any = None, end: Any = None, symbols: Iterable[str] | None = None
    ) -> pd.DataFrame:
        """One field as a (date x symbol) frame; missing bars (suspensions) are NaN."""
        if field not in BAR_COLUMNS or field in ("date", "symbol", "adjustment"):
            raise ValueError(f"read_panel needs a numeric bar field, not {field!r}")
        long = self._read_bar_columns(["date", "symbol", field], start, end, symbols, categorical=True)
        return _scatter(long, field)

    def symbols(self) -> list[str]:
        """Every symbol with at least one stored bar."""
        seen: set[str] = set()
        for path in self.bar_files():
            seen.update(pq.read_table(path, columns=["symbol"]).column("symbol").unique().to_pylist())
        return sorted(seen)

    def bar_summary(self) -> dict[str, Any]:
        """Rows, symbols and date range of the stored bars."""
        rows, first, last, seen = 0, None, None, set()
        for path in self.bar_files():
            table = pq.read_table(path, columns=["date", "symbol"])
            rows += table.num_rows
            dates = table.column("date").to_pandas()
            first = dates.min() if first is None else min(first, dates.min())
            last = dates.max() if last is None else max(last, dates.max())
            seen.update(table.column("symbol").unique().to_pylist())
        return {"rows": rows, "symbols": len(seen), "first_date": first, "last_date": last}

    # -- index levels --------------------------------------------------------------------------
    def write_index(self, frame: pd.DataFrame) -> int:
        """Merge validated index levels (date, code, close, kind); returns rows not stored before."""
        result = validate_index(frame)
        if len(result.quarantined):
            raise _rejection("index levels", result.quarantined)
        new = result.valid
        old = pq.read_table(self.index_path).to_pandas() if self.index_path.exists() else new.iloc[:0]
        known = pd.MultiIndex.from_frame(old[INDEX_KEY])
        added = int((~pd.MultiIndex.from_frame(new[INDEX_KEY]).isin(known)).sum())
        merged = pd.concat([old, new], ignore_index=True).drop_duplicates(INDEX_KEY, keep="last")
        _write_parquet(merged.sort_values(["code", "kind", "date"]).reset_index(drop=True), self.index_path)
        return added

    def read_index(self, code: str = "000300", kind: str = "price") -> pd.Series:
        """Index closes as a Series (DatetimeIndex date -> close); empty when not stored."""
        if not self.index_path.exists():
            return pd.Series(dtype="float64", name="close", index=pd.DatetimeIndex([], name="date"))
        table = pq.read_table(self.index_path, filters=[("code", "=", code), ("kind", "=", kind)])
        frame = table.to_pandas()
        return frame.set_index("date")["close"].sort_index()

    # -- membership ----------------------------------------------------------------------------
    def write_membership(self, frame: pd.DataFrame) -> int:
        """Store membership snapshots; an effective date present in `frame` replaces that whole snapshot."""
        new = validate_membership(frame)
        old = self.read_membership()
        kept = old[~old["effective_date"].isin(new["effective_date"].unique())]
        merged = pd.concat([kept, new], ignore_index=True).sort_values(["effective_date", "symbol"])
        _write_parquet(merged.reset_index(drop=True), self.membership_path)
        return len(new)

    def read_membership(self) -> pd.DataFrame:
        """All membership rows (effective_date, symbol, name); members on d = latest effective_date <= d."""
        if not self.membership_path.exists():
            frame = pd.DataFrame({name: pd.Series(dtype=object) for name in MEMBERSHIP_COLUMNS})
            frame["effective_date"] = frame["effective_date"].astype("datetime64[ns]")
            return frame
        return pq.read_table(self.membership_path).to_pandas()

    def members_on(self, date: Any) -> list[str]:
        """CSI 300 members on `date` (point in time); empty before the first stored snapshot."""
        from oomrl.market.universe import members_on

        return members_on(self.read_membership(), date)

    # -- manifest ------------------------------------------------------------------------------
    def record_ingest(self, entry: dict[str, Any]) -> None:
        """Append an ingest record (source, range, rows, when) to manifest.json, atomically."""
        manifest = self.manifest()
        stamped = {"at": datetime.now(UTC).isoformat(timespec="seconds"), **entry}
        manifest.setdefault("ingests", []).append(stamped)
        payload = json.dumps(manifest, indent=2, default=str).encode()
        atomic_write(self.manifest_path, lambda name: Path(name).write_bytes(payload))

    def manifest(self) -> dict[str, Any]:
        """The ingest history ({"ingests": [...]}); empty for a new store."""
        if not self.manifest_path.exists():
            return {}
        return json.loads(self.manifest_path.read_text())
