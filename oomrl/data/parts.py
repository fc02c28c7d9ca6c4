"""Immutable parquet files of the store: atomic writes, and a year of bars as part files by key.

Part files of a year are merged by key."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oomrl.files import atomic_write

MAX_PARTS = 12
"""Beyond this many parts a write compacts the year into one file (reads stay a handful of
scans)."""
COMPRESSION = "zstd"
BAR_KEY = ["date", "symbol"]


def write_parquet(table: pa.Table, path: Path) -> None:
    atomic_write(path, lambda name: pq.write_table(table, name, compression=COMPRESSION))


def table_of(frame: pd.DataFrame) -> pa.Table:
    """A frame as an arrow table with its own columns. The store keeps whatever columns the schema
    has."""
    return pa.Table.from_pandas(frame, preserve_index=False)


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """Tables of files written under different schema versions: a column one lacks is null there."""
    return pa.concat_tables(tables, promote_options="default")


def read_columns(path: Path, columns: Sequence[str], **options: Any) -> pa.Table:
    """`columns` of a parquet file.

    A column the file predates comes back null (filled by concat's promotion)."""
    present = set(pq.read_schema(path).names)
    table = pq.read_table(path, columns=[name for name in columns if name in present], **options)
    for position, name in enumerate(columns):
        if name not in present:
            table = table.add_column(position, name, pa.nulls(table.num_rows))
    return table


def drop_keys(table: pa.Table, incoming: pd.DataFrame) -> tuple[pa.Table, int]:
    """Remove stored rows whose (date, symbol) is in `incoming`; returns (table, rows removed)."""
    overlap = set(incoming["symbol"].unique()) & set(table.column("symbol").unique().to_pylist())
    if not overlap:
        return table, 0
    stored = table.select(BAR_KEY).to_pandas()
    candidates = stored["symbol"].isin(overlap).to_numpy()
    keys = pd.MultiIndex.from_frame(incoming[BAR_KEY])
    hit = np.zeros(len(stored), dtype=bool)
    hit[candidates] = pd.MultiIndex.from_frame(stored.loc[candidates, BAR_KEY]).isin(keys)
    return table.filter(pa.array(~hit)), int(hit.sum())


@dataclass
class Part:
    """A part file (named relative to its year folder) and what it holds.

    So writes skip parts that cannot contain the incoming keys."""

    file: str
    first: str
    last: str
    rows: int
    symbols: list[str]

    def may_hold(self, first: str, last: str, symbols: set[str]) -> bool:
        return self.first <= last and first <= self.last and not symbols.isdisjoint(self.symbols)


@dataclass
class YearMerge:
    """The outcome of merging bars into one year.

    Its new part list, the file written and the parts it replaces."""

    parts: list[Part]
    written: str
    replaced: list[Part] = field(default_factory=list)
    added: int = 0


def merge_year(folder: Path, parts: list[Part], incoming: pd.DataFrame) -> YearMerge:
    """Write one new part holding `incoming` plus the stored rows of the parts it overlaps.

    `incoming` are validated bars of this year. Rows for a stored (date, symbol) replace it.
    Nothing existing is modified. The caller commits the returned part list, then deletes the
    replaced parts."""
    first, last = f"{incoming['date'].min():%Y-%m-%d}", f"{incoming['date'].max():%Y-%m-%d}"
    symbols = set(incoming["symbol"].unique())
    touched = [part for part in parts if part.may_hold(first, last, symbols)]
    kept = [part for part in parts if part not in touched]
    if len(kept) + 1 > MAX_PARTS:
        touched, kept = parts, []
    tables, replaced_rows = [table_of(incoming)], 0
    for part in touched:
        remaining, dropped = drop_keys(pq.read_table(folder / part.file), incoming)
        tables.append(remaining)
        replaced_rows += dropped
    table = concat(tables)
    name = f"part-{uuid.uuid4().hex[:12]}.parquet"
    write_parquet(table, folder / name)
    dates = table.column("date").to_pandas()
    new = Part(
        file=name,
        first=f"{dates.min():%Y-%m-%d}",
        last=f"{dates.max():%Y-%m-%d}",
        rows=table.num_rows,
        symbols=sorted(set(table.column("symbol").unique().to_pylist())),
    )
    return YearMerge(
        parts=[*kept, new], written=name, replaced=touched, added=len(incoming) - replaced_rows
    )
