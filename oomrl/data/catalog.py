"""The market store's commit point: store.json names every live file; replacing it commits a write.

Files are immutable once written. A write adds new files, then replaces store.json (the catalog) in
one os.replace. Then it deletes the files the old catalog named and the new one does not. Readers
load the catalog and read only what it names, so they always see one complete state. A file the
catalog does not name is an orphan. Its write never committed (a killed or failed ingest).
`orphans` finds them, and the next writer deletes them while holding the lock.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from oomrl.data.parts import Part
from oomrl.errors import StoreDamagedError
from oomrl.files import atomic_write

CATALOG_FILE = "store.json"
FORMAT = 2
MAX_INGEST_RECORDS = 500
"""Ingest records kept in the catalog (with their quarantined rows); older ones are dropped."""
LEGACY_PARTS = "_parts.json"
LEGACY_MANIFEST = "manifest.json"
STORE_FILE = re.compile(
    r"(bars/\d{4}/part-[0-9a-f]+|(index|membership)(-[0-9a-f]+)?|quarantine/[0-9A-Za-z-]+)\.parquet"
)
"""The only names a catalog may give: a tampered catalog cannot make a commit delete a file
elsewhere."""
LEGACY_FILE = re.compile(rf"bars/\d{{4}}/{re.escape(LEGACY_PARTS)}|{re.escape(LEGACY_MANIFEST)}")
TEMP_FILE = re.compile(r"(?P<folder>(?:[^/]+/)*)\.(?P<name>[^/]+)\.[A-Za-z0-9_]+\.tmp")
"""oomrl.files.atomic_write's temp file for `folder/name`: `folder/.name.<random>.tmp`."""


def written_by_store(relative: str, keep: Collection[str] = ()) -> bool:
    """Whether a path (relative to the store root) is one the store writes.

    That is a store file or legacy metadata. Or the temp file of one of those or of `keep`'s files.
    Only these are ever removed as orphans. Anything else a user put under data/ (notes, a
    backup.parquet) is left alone."""
    if STORE_FILE.fullmatch(relative) or LEGACY_FILE.fullmatch(relative):
        return True
    temp = TEMP_FILE.fullmatch(relative)
    if temp is None:
        return False
    target = temp["folder"] + temp["name"]
    return target in keep or bool(STORE_FILE.fullmatch(target) or LEGACY_FILE.fullmatch(target))


@dataclass
class Catalog:
    """What the store holds: bar parts by year, the index and membership files, the ingest
    history."""

    generation: int = 0
    years: dict[str, list[Part]] = field(default_factory=dict)
    index: str | None = None
    membership: str | None = None
    ingests: list[dict[str, Any]] = field(default_factory=list)
    legacy_files: list[str] = field(default_factory=list)
    """Metadata of the layout before store.json (per-year _parts.json, manifest.json): live until
    replaced."""

    def part_paths(self, first_year: int = 0, last_year: int = 9999) -> list[str]:
        """Relative paths of the bar parts of the years in [first_year, last_year], in year
        order."""
        return [
            f"bars/{year}/{part.file}"
            for year in sorted(self.years)
            if first_year <= int(year) <= last_year
            for part in self.years[year]
        ]

    def quarantine_files(self) -> list[str]:
        return [
            path for entry in self.ingests for path in entry.get("quarantine_files", {}).values()
        ]

    def live_files(self) -> set[str]:
        """Every file (relative to the store root) this catalog needs."""
        named = [
            self.index,
            self.membership,
            *self.part_paths(),
            *self.quarantine_files(),
            *self.legacy_files,
        ]
        return {path for path in named if path}

    def copy(self) -> Catalog:
        return copy.deepcopy(self)

    def to_json(self) -> bytes:
        payload = {
            "format": FORMAT,
            "generation": self.generation,
            "years": {
                year: [asdict(part) for part in parts] for year, parts in sorted(self.years.items())
            },
            "index": self.index,
            "membership": self.membership,
            "ingests": self.ingests[-MAX_INGEST_RECORDS:],
        }
        return json.dumps(payload, indent=1, default=str).encode()


UNREADABLE = (ValueError, KeyError, TypeError, AttributeError, RecursionError)
"""What parsing damaged metadata raises (RecursionError: JSON nested too deep)."""


def _checked(catalog: Catalog) -> Catalog:
    """The catalog, unless it names a file the store never writes.

    A tampered catalog (or legacy _parts.json) must not make a commit delete a file elsewhere."""
    strange = sorted(
        name
        for name in catalog.live_files()
        if not (STORE_FILE.fullmatch(name) or LEGACY_FILE.fullmatch(name))
    )
    if strange:
        raise ValueError(f"it names {strange[0]!r}, not a store file")
    return catalog


def _parse(raw: bytes) -> Catalog:
    data = json.loads(raw)
    return _checked(
        Catalog(
            generation=int(data["generation"]),
            years={year: [Part(**part) for part in parts] for year, parts in data["years"].items()},
            index=data["index"],
            membership=data["membership"],
            ingests=list(data["ingests"]),
        )
    )


def _legacy(root: Path) -> Catalog:
    """The catalog of a store written before store.json existed (per-year _parts.json,
    manifest.json)."""
    catalog = Catalog()
    bars = root / "bars"
    for meta in sorted(bars.glob(f"[0-9][0-9][0-9][0-9]/{LEGACY_PARTS}")) if bars.exists() else []:
        catalog.years[meta.parent.name] = [
            Part(**entry) for entry in json.loads(meta.read_text())["parts"]
        ]
        catalog.legacy_files.append(meta.relative_to(root).as_posix())
    for name in ("index", "membership"):
        if (root / f"{name}.parquet").exists():
            setattr(catalog, name, f"{name}.parquet")
    if (root / LEGACY_MANIFEST).exists():
        catalog.ingests = list(json.loads((root / LEGACY_MANIFEST).read_text()).get("ingests", []))
        catalog.legacy_files.append(LEGACY_MANIFEST)
    return _checked(catalog)


def load_catalog(root: Path) -> Catalog:
    """The last committed catalog of the store at `root` (empty for a new store)."""
    where = root / CATALOG_FILE
    try:
        try:
            raw = where.read_bytes()
        except FileNotFoundError:
            where = root  # its metadata: bars/<year>/_parts.json and manifest.json
            return _legacy(root)
        return _parse(raw)
    except UNREADABLE as exc:
        raise StoreDamagedError(
            f"the market store catalog {where} is unreadable ({exc}); "
            f"restore it from a backup or move {root} away and ingest again"
        ) from exc


def save_catalog(root: Path, catalog: Catalog) -> None:
    """Commit `catalog`: one durable os.replace of store.json."""
    payload = catalog.to_json()
    atomic_write(root / CATALOG_FILE, lambda temp: Path(temp).write_bytes(payload), durable=True)


def orphans(root: Path, catalog: Catalog, keep: set[str]) -> list[Path]:
    """Files under `root` that the store wrote but `catalog` does not name (and not in `keep`).

    They are leftovers of writes that never committed. Only meaningful while holding the writer
    lock."""
    live = catalog.live_files() | keep
    found: list[Path] = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if relative not in live and written_by_store(relative, keep):
                found.append(path)
    return sorted(found)
