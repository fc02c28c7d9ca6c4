"""One year of stored bars: immutable parquet part files, listed by a manifest that is replaced atomically."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

PART_MANIFEST = "_parts.json"
MAX_PARTS = 12
"""Beyond this many parts a write compacts the year into one file (reads stay a handful of scans)."""
COMPRESSION = "zstd"
BAR_KEY = ["date", "symbol"]
BAR_SCHEMA = pa.schema([
    ("date", pa.timestamp("ns")), ("symbol", pa.string()),
    *[(name, pa.float64()) for name in ("open", "high", "low", "close", "volume", "amount")],
    ("adjustment", pa.string()), ("prev_close_raw", pa.float64()),
])


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """Write via a temp file in the same folder, fsync, then os.replace: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        write(temp_name)
        with open(temp_name, "rb+") as stream:
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def write_parquet(table: pa.Table, path: Path) -> None:
    atomic_write(path, lambda name: pq.write_table(table, name, compression=COMPRESSION))


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
    """A part file and what it holds, so writes can skip parts that cannot contain the incoming keys."""

    file: str
    first: str
    last: str
    rows: int
    symbols: list[str]

    def may_hold(self, first: str, last: str, symbols: set[str]) -> bool:
        return self.first <= last and first <= self.last and not symbols.isdisjoint(self.symbols)


class YearPartition:
    """bars/YYYY/: part-*.parquet plus _parts.json. The manifest is the commit point of every write:
    a new part is written first, then the manifest naming it replaces the old one, then replaced parts
    are deleted. A crash at any step leaves the previous manifest and its parts readable. One writer
    at a time; files not in the manifest are leftovers and are removed by the next write."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def parts(self) -> list[Part]:
        path = self.folder / PART_MANIFEST
        if not path.exists():
            return []
        return [Part(**entry) for entry in json.loads(path.read_text())["parts"]]

    def files(self) -> list[Path]:
        return [self.folder / part.file for part in self.parts()]

    def _read(self, part: Part) -> pa.Table:
        return pq.read_table(self.folder / part.file, schema=BAR_SCHEMA)

    def merge(self, incoming: pd.DataFrame) -> int:
        """Add validated bars of this year; rows for stored (date, symbol) keys replace them. Returns rows added."""
        parts = self.parts()
        first, last = f"{incoming['date'].min():%Y-%m-%d}", f"{incoming['date'].max():%Y-%m-%d}"
        symbols = set(incoming["symbol"].unique())
        touched = [part for part in parts if part.may_hold(first, last, symbols)]
        kept = [part for part in parts if part not in touched]
        if len(kept) + 1 > MAX_PARTS:
            touched, kept = parts, []
        tables, replaced = [pa.Table.from_pandas(incoming, schema=BAR_SCHEMA, preserve_index=False)], 0
        for part in touched:
            remaining, dropped = drop_keys(self._read(part), incoming)
            tables.append(remaining)
            replaced += dropped
        table = pa.concat_tables(tables)
        name = f"part-{uuid.uuid4().hex[:12]}.parquet"
        write_parquet(table, self.folder / name)
        dates = table.column("date").to_pandas()
        new = Part(file=name, first=f"{dates.min():%Y-%m-%d}", last=f"{dates.max():%Y-%m-%d}", rows=table.num_rows,
                   symbols=sorted(set(table.column("symbol").unique().to_pylist())))
        payload = json.dumps({"parts": [asdict(part) for part in [*kept, new]]}).encode()
        atomic_write(self.folder / PART_MANIFEST, lambda temp: Path(temp).write_bytes(payload))
        live = {part.file for part in kept} | {name, PART_MANIFEST}
        for leftover in self.folder.iterdir():
            if leftover.name not in live:
                leftover.unlink(missing_ok=True)
        return len(incoming) - replaced
