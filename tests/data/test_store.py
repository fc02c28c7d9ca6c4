"""MarketStore: atomic and incremental writes, refusing invalid rows, fast panel reads, index and membership."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from oomrl.data import parts
from oomrl.data.store import MarketStore
from oomrl.errors import DataValidationError
from tests.data.conftest import BarsFactory


def test_write_then_read_round_trip(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    assert store.is_empty()
    frame = bars()
    assert store.write_bars(frame) == len(frame)
    back = store.read_bars()
    assert list(back.columns) == list(frame.columns)
    pd.testing.assert_frame_equal(back, frame.sort_values(["date", "symbol"]).reset_index(drop=True),
                                  check_dtype=False)
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


def _year_state(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_crash_mid_write_leaves_the_old_state(tmp_path: Path, bars: BarsFactory,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    year = tmp_path / "bars" / "2024"
    before = _year_state(year)

    def broken_write(table: object, where: str, **kwargs: object) -> None:
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken_write)
    with pytest.raises(OSError, match="disk full"):
        store.write_bars(bars(days=5))
    assert _year_state(year) == before  # same manifest, same part, no temp file left
    monkeypatch.undo()
    assert len(store.read_bars()) == 6


def test_a_crash_before_the_manifest_commit_hides_the_new_part(tmp_path: Path, bars: BarsFactory,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = MarketStore(tmp_path)
    store.write_bars(bars(days=3))
    real_replace = parts.os.replace

    def crash_on_manifest(src: str, dst: str) -> None:
        if str(dst).endswith(parts.PART_MANIFEST):
            raise OSError("power cut")
        real_replace(src, dst)

    monkeypatch.setattr(parts.os, "replace", crash_on_manifest)
    with pytest.raises(OSError, match="power cut"):
        store.write_bars(bars(days=5))
    monkeypatch.undo()
    assert len(store.read_bars()) == 6  # the orphan part is invisible
    assert store.write_bars(bars(days=5)) == 4  # and the next write cleans it up
    year = tmp_path / "bars" / "2024"
    assert len(list(year.glob("part-*.parquet"))) == len(parts.YearPartition(year).parts())


def test_new_days_add_parts_and_many_parts_compact(tmp_path: Path, bars: BarsFactory,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = MarketStore(tmp_path)
    full = bars(days=8)
    year = parts.YearPartition(tmp_path / "bars" / "2024")
    store.write_bars(full.iloc[:4])
    first_part = year.parts()[0].file
    store.write_bars(full.iloc[4:8])  # a later day: the stored part is not rewritten
    assert year.parts()[0].file == first_part and len(year.parts()) == 2
    monkeypatch.setattr(parts, "MAX_PARTS", 2)
    store.write_bars(full.iloc[8:12])
    assert len(year.parts()) == 1 and year.parts()[0].rows == 12
    assert len(store.read_bars()) == 12


def test_read_panel_is_date_by_symbol_with_gaps(tmp_path: Path, bars: BarsFactory) -> None:
    store = MarketStore(tmp_path)
    frame = bars(days=4)
    store.write_bars(frame.drop(index=[1]))  # 600519.SH suspended on the 2nd day
    panel = store.read_panel("close")
    assert isinstance(panel.index, pd.DatetimeIndex) and list(panel.columns) == ["300750.SZ", "600519.SH"]
    assert panel["600519.SH"].isna().sum() == 1 and panel["300750.SZ"].notna().all()
    assert panel.at[frame.at[0, "date"], "600519.SH"] == frame.at[0, "close"]
    sub = store.read_panel("volume", start=frame.at[2, "date"], symbols=["600519.SH"])
    assert sub.shape == (2, 1)
    with pytest.raises(ValueError, match="numeric bar field"):
        store.read_panel("symbol")


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
    assert store.write_index(pd.concat([_levels("price", [3400.0, 3410.0]),
                                        _levels("total_return", [5000.0, 5010.0])])) == 4
    assert store.write_index(_levels("price", [3400.0, 3411.0, 3420.0])) == 1
    price = store.read_index()
    assert price.tolist() == [3400.0, 3411.0, 3420.0] and price.index.is_monotonic_increasing
    assert store.read_index(kind="total_return").tolist() == [5000.0, 5010.0]
    with pytest.raises(DataValidationError, match="refusing to store index levels"):
        store.write_index(_levels("price", [3400.0, -3.0]))


def test_membership_snapshots_replace_by_effective_date(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    first = pd.DataFrame({"effective_date": ["2024-06-17"] * 2 + ["2024-12-16"],
                          "symbol": ["600519.SH", "000001.SZ", "600519.SH"], "name": ["", "", ""]})
    store.write_membership(first)
    assert store.members_on("2024-06-16") == []
    assert store.members_on("2024-07-01") == ["000001.SZ", "600519.SH"]
    assert store.members_on("2025-01-02") == ["600519.SH"]
    fix = pd.DataFrame({"effective_date": ["2024-12-16"], "symbol": ["300750.SZ"], "name": ["CATL"]})
    store.write_membership(fix)
    assert store.members_on("2025-01-02") == ["300750.SZ"]
    assert len(store.read_membership()) == 3


def test_manifest_records_ingests(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    store.record_ingest({"source": "sample", "rows": 3})
    store.record_ingest({"source": "akshare", "rows": 0})
    entries = store.manifest()["ingests"]
    assert [entry["source"] for entry in entries] == ["sample", "akshare"] and "at" in entries[0]
