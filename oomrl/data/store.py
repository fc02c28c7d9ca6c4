"""The parquet market store under OOMRL_HOME/data: one writer at a time, whole writes or none.

A write happens in a transaction. It takes the writer lock (oomrl.data.lock) and clears what a
killed writer left. It writes new immutable files and commits them by replacing the catalog
(oomrl.data.catalog). Then it deletes the files it replaced. `MarketStore.write_*` each run in a
transaction of their own. An ingest opens one with `store.transaction()` and does all its writes
in it. So its bars, index levels, membership, record and quarantined rows appear together or not
at all.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from oomrl.data.catalog import CATALOG_FILE, Catalog, load_catalog, orphans, save_catalog
from oomrl.data.lock import HOLDER_FILE, LOCK_FILE, WriterLock, describe
from oomrl.data.parts import merge_year, table_of, write_parquet
from oomrl.data.reader import StoreReader
from oomrl.data.validation import validate_bars, validate_index, validate_membership
from oomrl.errors import DataValidationError, StoreDamagedError, StoreWriteError
from oomrl.files import fsync_dir

INDEX_KEY = ["date", "code", "kind"]
KEEP = {CATALOG_FILE, LOCK_FILE, HOLDER_FILE}


def _rejection(what: str, quarantined: pd.DataFrame) -> DataValidationError:
    first = quarantined.iloc[0]
    label = (
        f"{first.get('symbol', first.get('code', ''))} {first['date']:%Y-%m-%d}"
        if pd.notna(first["date"])
        else "?"
    )
    return DataValidationError(
        f"refusing to store {what}: {len(quarantined)} row(s) fail validation, e.g. "
        f"{label}: {first['reason']}"
    )


@contextmanager
def _store_io(root: Path) -> Iterator[None]:
    """File-system failures of store writes (disk full, read-only, permissions) as one clear
    StoreWriteError."""
    try:
        yield
    except FileNotFoundError as exc:  # a write reads the parts it merges with: one is gone
        raise StoreDamagedError(
            f"{exc.filename or exc}: a file the market store at {root} names is missing; "
            "`oomrl data check` lists the damaged files"
        ) from exc
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        # Pyarrow puts detail in strerror
        reason = os.strerror(exc.errno) if isinstance(exc.errno, int) else str(exc)
        raise StoreWriteError(
            f"cannot write the market store at {root}: {reason}{where}; nothing was changed, "
            "the store still holds its last complete ingest"
        ) from exc


class MarketStore(StoreReader):
    """Bars (parquet parts by year), index levels and CSI 300 membership under `root`.

    See the module docstring."""

    @contextmanager
    def transaction(
        self, wait: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[StoreTransaction]:
        """Hold the writer lock (waiting up to `wait` s) and yield a transaction.

        It commits when the block ends without an exception. On an exception nothing it wrote
        stays."""
        with _store_io(self.root):
            lock = WriterLock(self.root, wait, on_wait).__enter__()
        try:
            tx = StoreTransaction(self.root, load_catalog(self.root), interrupted=lock.interrupted)
            with _store_io(self.root):
                tx.clear_orphans()
            try:
                yield tx
                with _store_io(self.root):
                    tx.commit()
            except BaseException:
                tx.rollback()
                raise
        finally:
            lock.__exit__(None, None, None)

    # One-shot writes: each is a transaction of its own.
    def write_bars(self, frame: pd.DataFrame) -> int:
        """Merge validated bars in. Returns the number of (date, symbol) rows not stored before.

        Refuses (DataValidationError) if any row fails validation: callers quarantine first. A row
        for an existing (date, symbol) replaces the stored one. So re-ingesting adds no duplicates.
        """
        with self.transaction() as tx:
            return tx.write_bars(frame)

    def write_index(self, frame: pd.DataFrame) -> int:
        """Merge validated index levels (date, code, close, kind); returns rows not stored
        before."""
        with self.transaction() as tx:
            return tx.write_index(frame)

    def write_membership(self, frame: pd.DataFrame) -> int:
        """Store membership snapshots; an effective date present in `frame` replaces that whole
        snapshot."""
        with self.transaction() as tx:
            return tx.write_membership(frame)

    def record_ingest(
        self, entry: dict[str, Any], quarantined: dict[str, pd.DataFrame] | None = None
    ) -> str:
        """Append an ingest record (and keep its quarantined rows); returns the record's id."""
        with self.transaction() as tx:
            return tx.record_ingest(entry, quarantined)


class StoreTransaction(MarketStore):
    """Writes staged on a private copy of the catalog; reads see them. Made by
    MarketStore.transaction()."""

    def __init__(
        self, root: Path, base: Catalog, interrupted: dict[str, Any] | None = None
    ) -> None:
        super().__init__(root, pinned=base.copy())
        self.base = base
        self.interrupted = interrupted
        """The lock note of a writer that died mid-write before this transaction (None if none
        did)."""
        self.cleared: list[str] = []
        """Orphans of that writer (or of failed writes) removed when this transaction started."""
        self.discarded = False
        self._new: set[str] = set()

    @property
    def staged(self) -> Catalog:
        assert self._pinned is not None
        return self._pinned

    @contextmanager
    def transaction(
        self, wait: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> Iterator[StoreTransaction]:
        """Already in one: nested writes join it."""
        yield self

    def clear_orphans(self) -> None:
        """The start-up check: delete files that no committed catalog names (a killed or failed
        write's)."""
        for path in orphans(self.root, self.base, KEEP):
            path.unlink(missing_ok=True)
            self.cleared.append(path.relative_to(self.root).as_posix())

    def recovery_note(self) -> str | None:
        """One line on what the start-up check found, for the user. None when the store was
        clean."""
        if self.interrupted is None and not self.cleared:
            return None
        who = (
            f"an earlier write by {describe(self.interrupted)} did not finish"
            if self.interrupted
            else "files of an unfinished write were left"
        )
        return (
            f"{who}; the store kept its last complete state and {len(self.cleared)} "
            "leftover file(s) "
            "were removed"
        )

    def discard(self) -> None:
        """Drop everything staged: the transaction ends without committing (the store stays as it
        was)."""
        self.discarded = True

    def _add_file(self, relative: str) -> Path:
        self._new.add(relative)
        return self.root / relative

    def _retire(self, relative: str | None) -> None:
        """A staged file is replaced. If this transaction wrote it, it is garbage now.

        Committed files stay until the commit: readers may be on them."""
        if relative in self._new:
            self._new.discard(relative)
            (self.root / relative).unlink(missing_ok=True)

    # -- writes --------------------------------------------------------------------------------
    def write_bars(self, frame: pd.DataFrame) -> int:
        result = validate_bars(frame)
        if len(result.quarantined):
            raise _rejection("bars", result.quarantined)
        bars, added = result.valid, 0
        for year, part in bars.groupby(bars["date"].dt.year):
            key = str(int(year))
            folder = self.root / "bars" / key
            with _store_io(self.root):
                merged = merge_year(folder, self.staged.years.get(key, []), part)
            self._add_file(f"bars/{key}/{merged.written}")
            for old in merged.replaced:
                self._retire(f"bars/{key}/{old.file}")
            self.staged.years[key] = merged.parts
            added += merged.added
        return added

    def write_index(self, frame: pd.DataFrame) -> int:
        result = validate_index(frame)
        if len(result.quarantined):
            raise _rejection("index levels", result.quarantined)
        new = result.valid
        old = self.read_index_levels() if self.staged.index else new.iloc[:0]
        known = pd.MultiIndex.from_frame(old[INDEX_KEY]) if len(old) else None
        fresh = new if known is None else new[~pd.MultiIndex.from_frame(new[INDEX_KEY]).isin(known)]
        merged = pd.concat([old, new], ignore_index=True).drop_duplicates(INDEX_KEY, keep="last")
        self._replace_reference("index", merged.sort_values(["code", "kind", "date"]))
        return len(fresh)

    def write_membership(self, frame: pd.DataFrame) -> int:
        new = validate_membership(frame)
        old = self.read_membership()
        kept = old[~old["effective_date"].isin(new["effective_date"].unique())]
        merged = pd.concat([kept, new], ignore_index=True).sort_values(["effective_date", "symbol"])
        self._replace_reference("membership", merged)
        return len(new)

    def _replace_reference(self, name: str, frame: pd.DataFrame) -> None:
        relative = f"{name}-{uuid.uuid4().hex[:12]}.parquet"
        with _store_io(self.root):
            write_parquet(table_of(frame.reset_index(drop=True)), self._add_file(relative))
        self._retire(getattr(self.staged, name))
        setattr(self.staged, name, relative)

    def record_ingest(
        self, entry: dict[str, Any], quarantined: dict[str, pd.DataFrame] | None = None
    ) -> str:
        ident = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
        files: dict[str, str] = {}
        for table, rows in (quarantined or {}).items():
            if len(rows):
                files[table] = f"quarantine/{ident}-{table}.parquet"
                with _store_io(self.root):
                    write_parquet(
                        table_of(rows.reset_index(drop=True)), self._add_file(files[table])
                    )
        self.staged.ingests.append(
            {
                "id": ident,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                **entry,
                "quarantine_files": files,
            }
        )
        return ident

    # -- end -----------------------------------------------------------------------------------
    def commit(self) -> None:
        """Replace the catalog (the commit point), then delete the committed files it no longer
        names."""
        if self.discarded or not self._new and self.staged.to_json() == self.base.to_json():
            self.rollback()
            return
        self.staged.generation = self.base.generation + 1
        self.staged.legacy_files = []
        for folder in sorted({(self.root / relative).parent for relative in self._new}):
            # The new files' names must survive a power cut before the catalog names them
            fsync_dir(folder)
        save_catalog(self.root, self.staged)
        self._new.clear()
        for relative in sorted(self.base.live_files() - self.staged.live_files()):
            # Committed already: a file left here is an orphan the next writer clears
            with suppress(OSError):
                (self.root / relative).unlink(missing_ok=True)

    def rollback(self) -> None:
        """Delete every file this transaction wrote; the committed catalog and its files are
        untouched."""
        for relative in sorted(self._new):
            (self.root / relative).unlink(missing_ok=True)
        self._new.clear()
