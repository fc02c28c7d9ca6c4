"""MarketStore: atomic and incremental writes, refusing invalid rows, fast panel reads, index and
membership."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oomrl import files
from oomrl.data import parts
from oomrl.data.catalog import CATALOG_FILE
from oomrl.data.lock import HOLDER_FILE, LOCK_FILE
from oomrl.data.store import MarketStore
from oomrl.errors import (
    DataValidationError,
    OomrlError,
    StoreBusyError,
    StoreDamagedError,
    StoreWriteError,
)
from tests.data.conftest import BarsFactory, writer_elsewhere


def test_write_then_read_round_trip(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    assert store.is_empty()
    frame = bars()
    assert store.write_bars(frame) == len(frame)
    back = store.read_bars()
    assert list(back.columns) == list(frame.columns)
    pd.testing.assert_frame_equal(
        back, frame.sort_values(["date", "symbol"]).reset_index(drop=True), check_dtype=False
    )
    assert not store.is_empty()
    assert store.symbols() == ["300750.SZ", "600519.SH"]


def test_rewriting_the_same_range_adds_nothing(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    frame = bars()
    store.write_bars(frame)
    assert store.write_bars(frame) == 0
    assert len(store.read_bars()) == len(frame)


def test_later_range_appends_and_overlap_replaces(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    full = bars(days=10)
    first, second = full.iloc[:12], full.iloc[8:].copy()  # rows 8..11 overlap
    second.loc[second.index[0], "volume"] = 2_000_000.0
    second.loc[second.index[0], "amount"] *= 2
    store.write_bars(first)
    assert store.write_bars(second) == len(full) - 12
    back = store.read_bars()
    assert len(back) == len(full)
    changed = back[(back["date"] == full.at[8, "date"]) & (back["symbol"] == full.at[8, "symbol"])]
    assert changed["volume"].item() == 2_000_000.0


def test_new_symbols_append_without_touching_others(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(symbols=("600519.SH",)))
    assert store.write_bars(bars(symbols=("000001.SZ",))) == 5
    assert store.read_panel("close").shape == (5, 2)


def test_years_are_separate_files(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(start="2024-12-26", days=6))
    assert sorted(p.name for p in (tmp_path / "bars").iterdir()) == ["2024", "2025"]
    assert len(store.read_bars(start="2025-01-01")) == 2 * 2
    assert len(store.read_bars(end="2024-12-31")) == 4 * 2
    assert store.bar_summary()["first_date"] == pd.Timestamp("2024-12-26")


def test_invalid_rows_are_refused_and_nothing_is_written(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    frame = bars()
    frame.at[3, "high"] = frame.at[3, "low"] - 1
    with pytest.raises(DataValidationError, match="refusing to store bars: 1 row.*high_below_low"):
        store.write_bars(frame)
    assert store.is_empty() and store.read_bars().empty


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the store but the lock file, by relative path, with its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != LOCK_FILE
    }


def test_a_crash_mid_write_leaves_the_old_state(
    tmp_path: Path, bars: BarsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    before = _files(tmp_path)

    def broken_write(table: object, where: str, **kwargs: object) -> None:
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError(errno.ENOSPC, "Error writing bytes to file")

    monkeypatch.setattr(pq, "write_table", broken_write)
    with pytest.raises(
        StoreWriteError,
        match="cannot write the market store .*No space left on device.*nothing was changed",
    ):
        store.write_bars(bars(days=5))
    assert _files(tmp_path) == before  # same catalog, same part, no temp file left
    monkeypatch.undo()
    assert len(store.read_bars()) == 6


def test_a_crash_before_the_catalog_commit_hides_everything_written(
    tmp_path: Path, bars: BarsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    real_replace = files.os.replace

    def crash_on_commit(src: str, dst: str) -> None:
        if str(dst).endswith(CATALOG_FILE):
            raise OSError(errno.EIO, "power cut")
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", crash_on_commit)
    with pytest.raises(StoreWriteError, match="Input/output error"), store.transaction() as tx:
        tx.write_bars(bars(days=5))
        tx.write_index(_levels("price", [3400.0, 3410.0]))
    monkeypatch.undo()
    assert len(store.read_bars()) == 6 and store.read_index().empty
    assert store.write_bars(bars(days=5)) == 4
    live = {f"bars/2024/{part.file}" for part in store.catalog().years["2024"]}
    assert {path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*.parquet")} == live


def test_a_transaction_commits_all_its_writes_or_none(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as tx:
        tx.write_bars(bars(days=3))
        tx.write_index(_levels("price", [3400.0, 3410.0]))
        assert (
            len(tx.read_bars()) == 6 and len(tx.read_index()) == 2
        )  # the transaction sees its own writes
        assert store.is_empty()  # others do not, until it commits
        raise RuntimeError("boom")
    assert (
        store.is_empty()
        and not list(tmp_path.rglob("*.parquet"))
        and store.catalog().generation == 0
    )
    with store.transaction() as tx:
        tx.write_bars(bars(days=3))
        tx.write_bars(
            bars(days=5)
        )  # replaces the part it wrote a moment ago: that one is deleted at once
        tx.write_index(_levels("price", [3400.0, 3410.0]))
        tx.record_ingest({"source": "test"})
    assert len(store.read_bars()) == 10 and len(store.read_index()) == 2
    assert store.catalog().generation == 1 and len(list(tmp_path.rglob("*.parquet"))) == 2


def test_a_reader_whose_files_were_replaced_retries_on_the_new_catalog(
    tmp_path: Path, bars: BarsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    reader = MarketStore(tmp_path)
    old = reader.catalog()
    store.write_bars(bars(days=5))  # commits a new part and deletes the one `old` names
    served = iter([old])
    real_catalog = MarketStore.catalog
    monkeypatch.setattr(
        MarketStore, "catalog", lambda self: next(served, None) or real_catalog(self)
    )
    assert len(reader.read_bars()) == 10


def test_a_file_removed_behind_the_stores_back_is_reported(
    tmp_path: Path, bars: BarsFactory
) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    next(tmp_path.rglob("part-*.parquet")).unlink()
    with pytest.raises(StoreDamagedError, match="part-.*names is missing.*ingest again"):
        store.read_bars()
    with pytest.raises(StoreDamagedError, match="part-.*names is missing.*oomrl data check"):
        store.write_bars(bars(days=3))  # the write merges with the missing part
    other = MarketStore(tmp_path / "other")
    other.write_bars(bars(days=3))
    next(other.root.rglob("part-*.parquet")).write_bytes(b"not parquet at all")
    with pytest.raises(StoreDamagedError, match="cannot read the market store .*oomrl data check"):
        other.read_bars()
    (tmp_path / CATALOG_FILE).write_text("{not json")
    with pytest.raises(StoreDamagedError, match="store.json is unreadable"):
        store.read_bars()


def test_a_tampered_catalog_cannot_point_outside_the_store(
    tmp_path: Path, bars: BarsFactory
) -> None:
    store = MarketStore(tmp_path / "data")
    store.write_index(_levels("price", [3400.0, 3410.0]))
    victim = tmp_path / "ledger.db"
    victim.write_bytes(b"precious")
    catalog = json.loads((store.root / CATALOG_FILE).read_text())
    catalog["index"] = "../ledger.db"  # a commit replacing the index would delete the file it names
    (store.root / CATALOG_FILE).write_text(json.dumps(catalog))
    with pytest.raises(StoreDamagedError, match="it names '../ledger.db', not a store file"):
        store.write_index(_levels("price", [3400.0, 3420.0]))
    assert victim.read_bytes() == b"precious"


def test_the_next_writer_clears_what_a_killed_writer_left(
    tmp_path: Path, bars: BarsFactory
) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    before = store.read_bars()
    # What a writer killed mid-ingest leaves: new parts and a temp file no catalog names, and its
    # lock note.
    orphan = tmp_path / "bars" / "2024" / "part-deadbeef0000.parquet"
    orphan.write_bytes(b"PAR1 partial")
    (tmp_path / "index-deadbeef0000.parquet").write_bytes(b"PAR1")
    (tmp_path / ".store.json.x1y2.tmp").write_bytes(b"{")
    (tmp_path / "bars" / "2024" / ".part-0123456789ab.parquet.k2j3_x.tmp").write_bytes(b"PAR1")
    # A user's files are never touched, whatever their names end with.
    users = [
        tmp_path / "notes.txt",
        tmp_path / "backup.parquet",
        tmp_path / "bars" / "2024" / "mine.parquet",
        tmp_path / "old" / "index.parquet",
        tmp_path / ".notes.txt.abc.tmp",
    ]
    for path in users:
        path.parent.mkdir(exist_ok=True)
        path.write_text("a user's file")
    (tmp_path / HOLDER_FILE).write_text(
        json.dumps({"pid": 4242, "command": "oomrl ingest", "since": "then"})
    )
    pd.testing.assert_frame_equal(store.read_bars(), before)  # readers never see them
    with store.transaction() as tx:
        assert tx.interrupted is not None and tx.interrupted["pid"] == 4242
        assert sorted(tx.cleared) == [
            ".store.json.x1y2.tmp",
            "bars/2024/.part-0123456789ab.parquet.k2j3_x.tmp",
            "bars/2024/part-deadbeef0000.parquet",
            "index-deadbeef0000.parquet",
        ]
        assert "pid 4242 (oomrl ingest) since then did not finish" in str(tx.recovery_note())
    assert (
        not orphan.exists()
        and all(path.exists() for path in users)
        and not (tmp_path / HOLDER_FILE).exists()
    )
    pd.testing.assert_frame_equal(store.read_bars(), before)
    with store.transaction() as tx:
        assert tx.recovery_note() is None


@pytest.mark.slow
def test_one_writer_at_a_time(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    waits: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def first_writer() -> None:
        with store.transaction() as tx:
            tx.write_bars(bars(days=3))
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=first_writer)
    thread.start()
    assert holding.wait(10)
    with (
        pytest.raises(StoreBusyError, match=f"being written by pid {os.getpid()} .*not waiting"),
        store.transaction(wait=0),
    ):
        pass
    with (
        pytest.raises(StoreBusyError, match="still being written by pid .* after 0 s"),
        store.transaction(wait=0.2, on_wait=waits.append),
    ):
        pass
    assert waits and "waiting up to 0 s for pid" in waits[0]
    threading.Timer(0.3, release.set).start()
    with store.transaction(wait=10, on_wait=waits.append) as tx:  # waits for the first, then writes
        assert len(tx.read_bars()) == 6
        tx.write_bars(bars(days=5))
    thread.join()
    assert len(store.read_bars()) == 10


def test_new_days_add_parts_and_many_parts_compact(
    tmp_path: Path, bars: BarsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path)
    full = bars(days=8)

    def year() -> list[parts.Part]:
        return store.catalog().years["2024"]

    store.write_bars(full.iloc[:4])
    first_part = year()[0].file
    store.write_bars(full.iloc[4:8])  # a later day: the stored part is not rewritten
    assert year()[0].file == first_part and len(year()) == 2
    monkeypatch.setattr(parts, "MAX_PARTS", 2)
    store.write_bars(full.iloc[8:12])
    assert len(year()) == 1 and year()[0].rows == 12
    assert len(store.read_bars()) == 12
    assert (
        len(list((tmp_path / "bars" / "2024").glob("part-*.parquet"))) == 1
    )  # replaced parts are deleted


def test_read_panel_is_date_by_symbol_with_gaps(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    frame = bars(days=4)
    store.write_bars(frame.drop(index=[1]))  # 600519.SH suspended on the 2nd day
    panel = store.read_panel("close")
    assert isinstance(panel.index, pd.DatetimeIndex) and list(panel.columns) == [
        "300750.SZ",
        "600519.SH",
    ]
    assert panel["600519.SH"].isna().sum() == 1 and panel["300750.SZ"].notna().all()
    assert panel.at[frame.at[0, "date"], "600519.SH"] == frame.at[0, "close"]
    sub = store.read_panel("volume", start=frame.at[2, "date"], symbols=["600519.SH"])
    assert sub.shape == (2, 1)
    with pytest.raises(ValueError, match="numeric bar field"):
        store.read_panel("symbol")


def test_read_panels_reads_once_what_read_panel_gives_per_field(
    tmp_path: Path, bars: BarsFactory
) -> None:
    store = MarketStore(tmp_path)
    frame = bars(days=4)
    store.write_bars(frame.drop(index=[1]))
    panels = store.read_panels(["close", "volume", "symbol", "close"], start=frame.at[1, "date"])
    assert list(panels) == [
        "close",
        "volume",
    ]  # a non-numeric field is left out, a repeated one read once
    for field, panel in panels.items():
        pd.testing.assert_frame_equal(panel, store.read_panel(field, start=frame.at[1, "date"]))
    assert MarketStore(tmp_path / "empty").read_panels(["close"])["close"].empty


def test_reading_an_empty_store(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    assert store.read_bars().empty and store.read_panel("close").empty
    assert store.read_index().empty and store.read_membership().empty
    assert store.members_on("2025-01-02") == [] and store.symbols() == []
    assert store.bar_summary() == {"rows": 0, "symbols": 0, "first_date": None, "last_date": None}
    assert store.manifest() == {}


def _levels(kind: str, closes: list[float]) -> pd.DataFrame:
    dates = pd.to_datetime(["2024-07-01", "2024-07-02", "2024-07-03"][: len(closes)])
    return pd.DataFrame({"date": dates, "code": "000300", "close": closes, "kind": kind})


def test_index_levels_by_kind_and_incremental(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    assert (
        store.write_index(
            pd.concat(
                [_levels("price", [3400.0, 3410.0]), _levels("total_return", [5000.0, 5010.0])]
            )
        )
        == 4
    )
    assert store.write_index(_levels("price", [3400.0, 3411.0, 3420.0])) == 1
    price = store.read_index()
    assert price.tolist() == [3400.0, 3411.0, 3420.0] and price.index.is_monotonic_increasing
    assert store.read_index(kind="total_return").tolist() == [5000.0, 5010.0]
    with pytest.raises(DataValidationError, match="refusing to store index levels"):
        store.write_index(_levels("price", [3400.0, -3.0]))


def test_membership_snapshots_replace_by_effective_date(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    first = pd.DataFrame(
        {
            "effective_date": ["2024-06-17"] * 2 + ["2024-12-16"],
            "symbol": ["600519.SH", "000001.SZ", "600519.SH"],
            "name": ["", "", ""],
        }
    )
    store.write_membership(first)
    assert store.members_on("2024-06-16") == []
    assert store.members_on("2024-07-01") == ["000001.SZ", "600519.SH"]
    assert store.members_on("2025-01-02") == ["600519.SH"]
    fix = pd.DataFrame(
        {"effective_date": ["2024-12-16"], "symbol": ["300750.SZ"], "name": ["CATL"]}
    )
    store.write_membership(fix)
    assert store.members_on("2025-01-02") == ["300750.SZ"]
    assert len(store.read_membership()) == 3


def test_manifest_records_ingests(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    store.record_ingest({"source": "sample", "rows": 3})
    store.record_ingest({"source": "akshare", "rows": 0})
    entries = store.manifest()["ingests"]
    assert [entry["source"] for entry in entries] == ["sample", "akshare"] and "at" in entries[0]


def test_damaged_metadata_of_either_layout_is_named(tmp_path: Path, bars: BarsFactory) -> None:
    nested = MarketStore(tmp_path / "nested")
    nested.write_bars(bars(days=3))
    (nested.root / CATALOG_FILE).write_text("[" * 100_000)  # deeper than json can parse
    with pytest.raises(StoreDamagedError, match="store.json is unreadable .*ingest again"):
        nested.read_bars()
    legacy = tmp_path / "legacy"
    _legacy_store(legacy, bars(days=3))
    (legacy / "manifest.json").write_text("{not json")
    with pytest.raises(StoreDamagedError, match=f"catalog {legacy} is unreadable"):
        MarketStore(legacy).read_bars()


def test_a_tampered_legacy_part_list_cannot_point_outside_the_store(
    tmp_path: Path, bars: BarsFactory
) -> None:
    root = tmp_path / "data"
    _legacy_store(root, bars(days=3))
    victim = tmp_path / "ledger.db"
    victim.write_bytes(b"precious")
    meta = root / "bars" / "2024" / "_parts.json"
    meta.write_text(meta.read_text().replace("part-0123456789ab.parquet", "../../../ledger.db"))
    with pytest.raises(
        StoreDamagedError, match="it names 'bars/2024/../../../ledger.db', not a store file"
    ):
        MarketStore(root).write_bars(
            bars(days=5)
        )  # a migrating write would retire (delete) the part it names
    assert victim.read_bytes() == b"precious"


def _legacy_store(root: Path, frame: pd.DataFrame) -> None:
    """A store as the previous layout wrote it: per-year _parts.json, index/membership/manifest
    files, and a part written before prev_close_raw existed (a column the schema gained since)."""
    year = root / "bars" / "2024"
    year.mkdir(parents=True)
    old = frame.drop(columns=["prev_close_raw"])
    pq.write_table(
        pa.Table.from_pandas(old, preserve_index=False), year / "part-0123456789ab.parquet"
    )
    (year / "_parts.json").write_text(
        json.dumps(
            {
                "parts": [
                    {
                        "file": "part-0123456789ab.parquet",
                        "first": f"{frame['date'].min():%Y-%m-%d}",
                        "last": f"{frame['date'].max():%Y-%m-%d}",
                        "rows": len(frame),
                        "symbols": sorted(frame["symbol"].unique()),
                    }
                ]
            }
        )
    )
    pq.write_table(pa.Table.from_pandas(_levels("price", [3400.0, 3410.0])), root / "index.parquet")
    pq.write_table(
        pa.Table.from_pandas(
            pd.DataFrame(
                {
                    "effective_date": pd.to_datetime(["2024-06-17"]),
                    "symbol": ["600519.SH"],
                    "name": [""],
                }
            )
        ),
        root / "membership.parquet",
    )
    (root / "manifest.json").write_text(
        json.dumps({"ingests": [{"source": "sample", "at": "2026-01-01"}]})
    )


def test_a_store_of_the_previous_layout_reads_and_migrates_on_the_next_write(
    tmp_path: Path, bars: BarsFactory
) -> None:
    frame = bars(days=3)
    _legacy_store(tmp_path, frame)
    store = MarketStore(tmp_path)
    back = store.read_bars()
    assert (
        len(back) == 6 and back["prev_close_raw"].isna().all()
    )  # the column the old part lacks reads as NaN
    assert len(store.read_index()) == 2 and store.members_on("2024-07-01") == ["600519.SH"]
    assert store.manifest()["ingests"][0]["source"] == "sample"
    assert store.write_bars(bars(days=5)) == 4
    assert (tmp_path / CATALOG_FILE).exists()
    assert (
        not (tmp_path / "manifest.json").exists()
        and not (tmp_path / "bars" / "2024" / "_parts.json").exists()
    )
    assert len(store.read_bars()) == 10 and len(store.read_index()) == 2
    assert [entry["source"] for entry in store.manifest()["ingests"]] == ["sample"]


def test_store_files_and_folders_are_private(tmp_path: Path, bars: BarsFactory) -> None:
    root = tmp_path / "home" / "data"
    store = MarketStore(root)
    with store.transaction() as tx:
        tx.write_bars(bars(days=3))
        tx.write_index(_levels("price", [3400.0, 3410.0]))
        tx.record_ingest({"source": "test"}, {"bars": bars(days=1).assign(reason="test")})
    paths = [root.parent, root, *root.rglob("*")]
    assert len(paths) >= 7
    modes = {
        path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode) for path in paths
    }
    assert {name: mode for name, mode in modes.items() if mode not in (0o600, 0o700)} == {}
    assert modes["home"] == 0o700


def test_quarantined_rows_are_kept_with_their_ingest(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    assert store.quarantine("last").empty
    bad = bars(days=2).assign(reason="high_below_low: made up")
    first = store.record_ingest(
        {"source": "a"}, {"bars": bad, "index": _levels("price", [1.0]).assign(reason="x")}
    )
    second = store.record_ingest({"source": "b"}, {"bars": bad.iloc[:1]})
    assert (
        set(store.quarantine(first)["table"]) == {"bars", "index"}
        and len(store.quarantine(first)) == 5
    )
    last = store.quarantine("last")
    assert (
        len(last) == 1
        and last.at[0, "ingest"] == second
        and last.at[0, "reason"] == "high_below_low: made up"
    )
    assert last.at[0, "symbol"] == bad.at[0, "symbol"] and last.at[0, "close"] == bad.at[0, "close"]
    assert len(store.quarantine()) == 6


def test_bar_files_are_the_live_parts_of_the_years_asked(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(start="2024-12-26", days=6))
    assert [path.parent.name for path in store.bar_files()] == ["2024", "2025"]
    assert [path.parent.name for path in store.bar_files(start=pd.Timestamp("2025-01-01"))] == [
        "2025"
    ]
    assert all(path.exists() for path in store.bar_files(end=pd.Timestamp("2024-12-31")))


def test_a_read_racing_endless_commits_gives_up_with_a_message(
    tmp_path: Path, bars: BarsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    catalog = store.catalog()
    gone = catalog.copy()
    gone.years["2024"][0].file = "part-gone00000000.parquet"
    generations = iter(range(1, 100))

    def ever_newer(self: MarketStore) -> object:
        fresh = gone.copy()
        fresh.generation = next(generations)
        return fresh

    monkeypatch.setattr(MarketStore, "catalog", ever_newer)
    with pytest.raises(StoreDamagedError, match="changed 5 times during one read"):
        store.read_bars()


def test_an_unreadable_lock_note_still_names_the_holder_as_best_it_can(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    with writer_elsewhere(tmp_path):
        (tmp_path / HOLDER_FILE).write_text("{garbage")
        with (
            pytest.raises(StoreBusyError, match=r"written by pid \? \(\(unreadable note\)\)"),
            store.transaction(wait=0),
        ):
            pass


def test_a_lock_note_that_cannot_be_written_releases_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path)

    def full_disk(path: Path, write: object, durable: bool = False) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("oomrl.data.lock.atomic_write", full_disk)
    with (
        pytest.raises(StoreWriteError, match=r"No space left on device \(.*\.writer\.json\)"),
        store.transaction(),
    ):
        pass
    monkeypatch.undo()
    with store.transaction(wait=0) as tx:  # not left locked
        assert tx.recovery_note() is None


def test_a_second_transaction_in_the_same_thread_fails_at_once(
    tmp_path: Path, bars: BarsFactory
) -> None:
    store = MarketStore(tmp_path)
    with store.transaction() as tx:
        with pytest.raises(OomrlError, match="this thread already holds the writer lock"):
            MarketStore(tmp_path / ".").write_bars(bars(days=3))  # would otherwise wait for itself
        with tx.transaction() as joined:  # the way to nest: join the open transaction
            joined.write_bars(bars(days=3))
    assert len(store.read_bars()) == 6
    store.write_bars(bars(days=5))  # released: the thread may write again


def test_a_schema_column_no_stored_file_has_reads_as_missing_values(
    tmp_path: Path, bars: BarsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = bars(days=3)
    _legacy_store(tmp_path, frame)  # its only part predates prev_close_raw
    store = MarketStore(tmp_path)
    back = store.read_bars()
    assert back["prev_close_raw"].dtype == "float64" and back["prev_close_raw"].isna().all()
    assert store.read_panel("prev_close_raw").isna().all().all()
