"""Reading the market store: every read goes through one committed catalog, one complete ingest."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oomrl.data.catalog import Catalog, load_catalog
from oomrl.data.parts import BAR_KEY, concat, read_columns
from oomrl.data.schema import BAR_COLUMNS, MEMBERSHIP_COLUMNS, NANOS_PER_DAY, empty_bars
from oomrl.errors import StoreDamagedError

T = TypeVar("T")
READ_ATTEMPTS = 5
"""A writer may commit and delete the files a reader's catalog named; the reader then retries on the
new one."""


def _scatter(long: pd.DataFrame, field: str) -> pd.DataFrame:
    """Long (date, symbol, field) rows into a dense (date x symbol) frame.

    Uses O(n) integer indexing."""
    return _Grid(long).frame(long, field)


class _Grid:
    """Where each long row lands in the dense (date x symbol) frame, worked out once for all fields.

    Far cheaper than DataFrame.pivot or sorting factorizations on millions of rows. Dates become day
    offsets and symbols keep their dictionary codes. Only the few distinct values are sorted.
    """

    def __init__(self, long: pd.DataFrame) -> None:
        self.empty = long.empty
        if self.empty:
            return
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
        self.shape = (int(present.sum()), len(ordered))
        self.rows, self.columns = row_of[offset], column_of[codes]
        self.dates = pd.to_datetime((np.flatnonzero(present) + day.min()) * NANOS_PER_DAY)
        self.names = names[ordered]

    def frame(self, long: pd.DataFrame, field: str) -> pd.DataFrame:
        """The dense frame of one field. NaN where a symbol has no row on a date."""
        if self.empty:
            return pd.DataFrame(
                index=pd.DatetimeIndex([], name="date"),
                columns=pd.Index([], name="symbol"),
                dtype="float64",
            )
        grid = np.full(self.shape, np.nan)
        grid[self.rows, self.columns] = long[field].to_numpy(dtype=np.float64)
        return pd.DataFrame(
            grid,
            index=pd.DatetimeIndex(self.dates, name="date"),
            columns=pd.Index(self.names, name="symbol"),
        )


def empty_membership() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=object) for name in MEMBERSHIP_COLUMNS})
    frame["effective_date"] = frame["effective_date"].astype("datetime64[ns]")
    return frame


class StoreReader:
    """Read access to the store at `root`. `pinned` fixes the catalog (a transaction reads its own
    staged state)."""

    def __init__(self, root: Path | str, pinned: Catalog | None = None) -> None:
        self.root = Path(root)
        self._pinned = pinned

    def catalog(self) -> Catalog:
        """The catalog reads go through: the pinned one, else the last committed one."""
        return self._pinned if self._pinned is not None else load_catalog(self.root)

    def _read(self, work: Callable[[Catalog], T]) -> T:
        """Run `work` on a catalog. If a concurrent commit deleted a file it names, retry on the
        new catalog."""
        catalog = self.catalog()
        for _ in range(READ_ATTEMPTS):
            try:
                return work(catalog)
            except FileNotFoundError as exc:
                latest = self.catalog()
                if self._pinned is not None or latest.generation == catalog.generation:
                    raise StoreDamagedError(
                        f"{exc.filename or exc}: a file the market store at {self.root} "
                        "names is missing; "
                        "something outside oomrl removed it. Move the store away and ingest again"
                    ) from exc
                catalog = latest
            # Permissions, I/O errors, a file that is not parquet
            except (OSError, pa.ArrowInvalid) as exc:
                raise StoreDamagedError(
                    f"cannot read the market store at {self.root}: {exc}; `oomrl data check` "
                    "lists the damaged files"
                ) from exc
        raise StoreDamagedError(
            f"the market store at {self.root} changed {READ_ATTEMPTS} times during one read"
        )

    # -- bars ----------------------------------------------------------------------------------
    def bar_files(
        self, start: pd.Timestamp | None = None, end: pd.Timestamp | None = None
    ) -> list[Path]:
        """The live part files of the years overlapping [start, end].

        As of now: a later commit may retire them."""
        lo = start.year if start is not None else 0
        hi = end.year if end is not None else 9999
        return [self.root / path for path in self.catalog().part_paths(lo, hi)]

    def is_empty(self) -> bool:
        """True when the store holds no bars and no benchmark levels."""
        catalog = self.catalog()
        return not catalog.part_paths() and catalog.index is None

    def _read_bar_columns(
        self,
        columns: Sequence[str],
        start: Any,
        end: Any,
        symbols: Iterable[str] | None,
        categorical: bool = False,
    ) -> pd.DataFrame:
        lo = pd.Timestamp(start) if start is not None else None
        hi = pd.Timestamp(end) if end is not None else None
        filters: list[tuple[str, str, Any]] = []
        if lo is not None:
            filters.append(("date", ">=", lo))
        if hi is not None:
            filters.append(("date", "<=", hi))
        if symbols is not None:
            filters.append(("symbol", "in", sorted(set(symbols))))
        # Symbols as a dictionary column: one string per symbol instead of one per row. That is
        # 12.5M rows -> 5k strings.
        options = {
            "filters": filters or None,
            "read_dictionary": ["symbol"] if categorical else None,
        }

        def read(catalog: Catalog) -> list[pa.Table]:
            paths = catalog.part_paths(
                lo.year if lo is not None else 0, hi.year if hi is not None else 9999
            )
            return [read_columns(self.root / path, columns, **options) for path in paths]

        tables = self._read(read)
        if not tables:
            return empty_bars().reindex(columns=list(columns))
        table = concat(tables)
        frame = (table.unify_dictionaries() if categorical else table).to_pandas()
        template = empty_bars()
        # A column no stored file has yet: the schema's dtype, all missing
        for name in table.column_names:
            if pa.types.is_null(table.schema.field(name).type) and name in template:
                dtype = template[name].dtype
                # Floats and dates hold NaN/NaT; a flag is unknown (NA), never a silent False.
                frame[name] = pd.Series(np.nan, index=frame.index).astype(
                    "boolean" if dtype.kind == "b" else dtype if dtype.kind in "fmM" else object
                )
        return frame

    def read_bars(
        self, start: Any = None, end: Any = None, symbols: Iterable[str] | None = None
    ) -> pd.DataFrame:
        """Long bars (BAR_COLUMNS) in [start, end] for the given symbols (all when None).

        Sorted by date, symbol."""
        bars = self._read_bar_columns(BAR_COLUMNS, start, end, symbols)
        return bars.sort_values(BAR_KEY, kind="mergesort").reset_index(drop=True)

    def read_panel(
        self, field: str, start: Any = None, end: Any = None, symbols: Iterable[str] | None = None
    ) -> pd.DataFrame:
        """One field as a (date x symbol) frame; missing bars (suspensions) are NaN."""
        numeric = set(empty_bars().select_dtypes("number").columns)
        if field not in numeric:
            raise ValueError(f"read_panel needs a numeric bar field, not {field!r}")
        long = self._read_bar_columns(
            ["date", "symbol", field], start, end, symbols, categorical=True
        )
        return _scatter(long, field)

    def read_panels(
        self,
        fields: Iterable[str],
        start: Any = None,
        end: Any = None,
        symbols: Iterable[str] | None = None,
    ) -> dict[str, pd.DataFrame]:
        """Several numeric fields as read_panel gives each, from one read of the files.

        Other fields are left out."""
        numeric = set(empty_bars().select_dtypes("number").columns)
        wanted = [field for field in dict.fromkeys(fields) if field in numeric]
        long = self._read_bar_columns(
            ["date", "symbol", *wanted], start, end, symbols, categorical=True
        )
        grid = _Grid(long)
        return {field: grid.frame(long, field) for field in wanted}

    def symbols(self) -> list[str]:
        """Every symbol with at least one stored bar."""
        return sorted(
            {
                symbol
                for parts in self.catalog().years.values()
                for part in parts
                for symbol in part.symbols
            }
        )

    def bar_summary(self) -> dict[str, Any]:
        """Rows, symbols and date range of the stored bars. From the catalog: no file is read."""
        parts = [part for year in self.catalog().years.values() for part in year]
        if not parts:
            return {"rows": 0, "symbols": 0, "first_date": None, "last_date": None}
        return {
            "rows": sum(part.rows for part in parts),
            "symbols": len({symbol for part in parts for symbol in part.symbols}),
            "first_date": pd.Timestamp(min(part.first for part in parts)),
            "last_date": pd.Timestamp(max(part.last for part in parts)),
        }

    # -- index levels and membership -----------------------------------------------------------
    def read_index(self, code: str = "000300", kind: str = "price") -> pd.Series:
        """Index closes as a Series (DatetimeIndex date -> close); empty when not stored."""

        def read(catalog: Catalog) -> pd.DataFrame | None:
            if catalog.index is None:
                return None
            filters = [("code", "=", code), ("kind", "=", kind)]
            return pq.read_table(self.root / catalog.index, filters=filters).to_pandas()

        frame = self._read(read)
        if frame is None:
            return pd.Series(dtype="float64", name="close", index=pd.DatetimeIndex([], name="date"))
        return frame.set_index("date")["close"].sort_index()

    def read_index_levels(self) -> pd.DataFrame:
        """Every stored index level (all codes and kinds); empty when none."""

        def read(catalog: Catalog) -> pd.DataFrame | None:
            return pq.read_table(self.root / catalog.index).to_pandas() if catalog.index else None

        return self._read(read) if self.catalog().index else pd.DataFrame()

    def read_membership(self) -> pd.DataFrame:
        """All membership rows (effective_date, symbol, name); members on d = latest effective_date
        <= d."""

        def read(catalog: Catalog) -> pd.DataFrame:
            if catalog.membership is None:
                return empty_membership()
            return pq.read_table(self.root / catalog.membership).to_pandas()

        return self._read(read)

    def members_on(self, date: Any) -> list[str]:
        """CSI 300 members on `date` (point in time); empty before the first stored snapshot."""
        from oomrl.market.universe import members_on

        return members_on(self.read_membership(), date)

    def verify(self) -> list[str]:
        """Problems with the files the catalog names (missing, unreadable); empty when every one
        reads."""
        problems = []
        for relative in sorted(self.catalog().live_files()):
            try:
                pq.read_metadata(self.root / relative)
            except FileNotFoundError:
                problems.append(f"{relative}: missing")
            # Pyarrow: ArrowInvalid (a ValueError) for a corrupt file
            except (OSError, ValueError) as exc:
                problems.append(f"{relative}: unreadable ({exc})")
        return problems

    # -- history -------------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """The ingest history ({"ingests": [...], "generation": n}); empty for a new store."""
        catalog = self.catalog()
        return (
            {"ingests": catalog.ingests, "generation": catalog.generation}
            if catalog.ingests
            else {}
        )

    def quarantine(self, ingest_id: str | None = None) -> pd.DataFrame:
        """Quarantined rows kept on disk, with `ingest` (id), `table` (bars | index) and `reason`
        columns.

        `ingest_id` selects one ingest ("last" for the most recent ingest); None gives every kept
        ingest.
        """

        def read(catalog: Catalog) -> list[pd.DataFrame]:
            entries = (
                catalog.ingests[-1:]
                if ingest_id == "last"
                else [
                    entry
                    for entry in catalog.ingests
                    if ingest_id is None or entry.get("id") == ingest_id
                ]
            )
            return [
                pq.read_table(self.root / path)
                .to_pandas()
                .assign(ingest=entry.get("id"), table=table)
                for entry in entries
                for table, path in entry.get("quarantine_files", {}).items()
            ]

        frames = self._read(read)
        if not frames:
            return pd.DataFrame(columns=["ingest", "table", "date", "reason"])
        return pd.concat(frames, ignore_index=True)
