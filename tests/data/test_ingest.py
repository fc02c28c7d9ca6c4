"""ingest(): quarantine with reasons, missing benchmark, universes, stale fallback, ensure_sample,
the CLI."""

from __future__ import annotations

import json
import shutil
import threading
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from oomrl.data.ingest import ingest, resolve_range, resolve_universe
from oomrl.data.sample import ensure_sample
from oomrl.data.sources.akshare import AkshareSource
from oomrl.data.sources.csv import CsvSource
from oomrl.data.sources.synthetic import SyntheticSource
from oomrl.data.store import MarketStore
from oomrl.errors import (
    DataValidationError,
    MissingBenchmarkError,
    OomrlError,
    SourceUnavailableError,
)
from oomrl.ops.cli import app
from oomrl.settings import get_settings
from tests.conftest import FIXTURES
from tests.data.conftest import writer_elsewhere

AKSHARE_STYLE = FIXTURES / "data" / "csv_akshare_style"
MAPPED = FIXTURES / "data" / "csv_mapped"


# Alike tests/flows/test_ingest_flow.py's flaky source, which counts calls to fail then recover;
# this one stays down. Each suite states its own failure.
class Unreachable(SyntheticSource):
    """A live source whose network is down (optionally only for bars, or only for some symbols)."""

    name = "flaky"
    live = True

    def __init__(self, down: set[str] | None = None, reference_down: bool = False) -> None:
        super().__init__(symbols=4, start="2024-07-01", days=20)
        self.down, self.reference_down = down, reference_down

    def coverage(self) -> None:
        return None

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        if self.reference_down:
            raise SourceUnavailableError("flaky: connection refused")
        return super().index_levels(code, kind, start, end)

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        if self.down is None or symbol in self.down:
            raise SourceUnavailableError(f"flaky: timeout fetching {symbol}")
        return super().bars(symbol, start, end)


def test_csv_ingest_stores_good_rows_and_reports_the_bad(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    seen: list[tuple[int, int, str]] = []
    report = ingest(
        CsvSource(MAPPED), "600519", None, None, store, progress=lambda *a: seen.append(a)
    )
    assert report.rows_fetched == 6 and report.rows_written == 4
    assert sorted(report.quarantine_reasons) == ["high_below_low", "non_session", "outside_range"]
    assert len(store.read_bars()) == 4 and pd.Timestamp("2024-07-03") not in set(
        store.read_bars()["date"]
    )
    assert seen == [(1, 1, "600519.SH")]
    assert report.summary()["quarantined_rows"] == 2
    assert store.manifest()["ingests"][-1]["source"] == "csv"


def test_csi300_universe_comes_from_the_source_membership(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    report = ingest(CsvSource(AKSHARE_STYLE), "csi300", "2024-07-01", "2024-07-05", store)
    assert report.symbols == ["000001.SZ", "300750.SZ", "600519.SH"]
    assert report.rows_written == 15 and report.index_rows == 10 and report.membership_rows == 3
    assert store.members_on("2024-07-02") == report.symbols
    again = ingest(CsvSource(AKSHARE_STYLE), "csi300", "2024-07-01", "2024-07-05", store)
    assert again.rows_written == 0 and len(store.read_bars()) == 15


def test_symbols_without_data_and_malformed_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = CsvSource(AKSHARE_STYLE)
    report = ingest(source, "600519,601318", None, None, MarketStore(tmp_path))
    assert report.symbols_without_data == ["601318.SH"] and report.rows_written == 5
    monkeypatch.setattr(
        source, "bars", lambda *args: pd.DataFrame({"date": ["2024-07-01"], "close": [1.0]})
    )
    with pytest.raises(
        DataValidationError, match="csv bars for 600519.SH: bar frame is missing column"
    ):
        ingest(source, "600519", None, None, MarketStore(tmp_path / "other"))


def test_missing_benchmark_fails_naming_the_problem(tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    shutil.copytree(AKSHARE_STYLE, folder)
    shutil.rmtree(folder / "index")
    with pytest.raises(
        MissingBenchmarkError, match="no CSI 300 \\(000300\\) levels.*missing benchmark"
    ):
        ingest(CsvSource(folder), "csi300", None, None, MarketStore(tmp_path / "store"))
    assert MarketStore(tmp_path / "store").is_empty()


def test_universe_forms(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    source = CsvSource(AKSHARE_STYLE)
    assert resolve_universe(
        "600519, sz000001", source, store, date(2024, 7, 1), date(2024, 7, 5)
    ) == ["000001.SZ", "600519.SH"]
    assert (
        resolve_universe("all", source, store, date(2024, 7, 1), date(2024, 7, 5))[0] == "000001.SZ"
    )
    with pytest.raises(OomrlError, match="no CSI 300 membership"):
        resolve_universe("csi300", source, store, date(2024, 7, 1), date(2024, 7, 5))
    with pytest.raises(OomrlError, match="cannot list its symbols"):
        resolve_universe("all", AkshareSource(), store, date(2024, 7, 1), date(2024, 7, 5))


def test_only_a_later_snapshot_gives_todays_members(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    store.write_membership(
        pd.DataFrame({"effective_date": ["2025-06-30"], "symbol": ["600519.SH"], "name": [""]})
    )
    assert resolve_universe("csi300", Unreachable(), store, date(2024, 7, 1), date(2024, 7, 5)) == [
        "600519.SH"
    ]


def test_ranges() -> None:
    assert resolve_range(CsvSource(AKSHARE_STYLE), None, "2024-07-03") == (
        date(2024, 7, 1),
        date(2024, 7, 3),
    )
    assert resolve_range(Unreachable(), None, None)[0] == date(2024, 1, 1)
    with pytest.raises(OomrlError, match="after end"):
        resolve_range(Unreachable(), "2024-07-05", "2024-07-01")


def test_unreachable_source_with_empty_store_fails(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailableError, match="flaky is unreachable.*store is empty"):
        ingest(
            Unreachable(reference_down=True),
            "all",
            "2024-07-01",
            "2024-07-26",
            MarketStore(tmp_path),
        )


def test_unreachable_source_falls_back_to_the_store_flagged_stale(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    ingest(CsvSource(AKSHARE_STYLE), "csi300", None, None, store)
    before = store.read_bars()
    report = ingest(Unreachable(reference_down=True), "csi300", "2024-07-01", "2024-07-26", store)
    assert report.stale and "connection refused" in str(report.stale_reason)
    assert "last bar 2024-07-05" in str(report.stale_reason)
    pd.testing.assert_frame_equal(store.read_bars(), before)
    every_bar_down = ingest(Unreachable(down=None), "csi300", "2024-07-01", "2024-07-26", store)
    # The flaky source's own 4 members
    assert every_bar_down.stale and len(every_bar_down.failures) == 4


def test_some_symbols_failing_is_reported_not_stale(tmp_path: Path) -> None:
    source = Unreachable(down={"000002.SZ"})
    store = MarketStore(tmp_path)
    report = ingest(source, "csi300", "2024-07-01", "2024-07-26", store)
    assert not report.stale and list(report.failures) == ["000002.SZ"]
    assert store.symbols() == ["600000.SH", "688001.SH", "688002.SH"]


@pytest.mark.slow
def test_ensure_sample_fills_an_empty_home_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = get_settings(store={"home": tmp_path})
    store = ensure_sample(settings)
    summary = store.bar_summary()
    assert summary["symbols"] > 300 and summary["last_date"] == pd.Timestamp("2026-02-27")
    assert store.read_index().index[0] <= pd.Timestamp("2005-01-04")
    assert len(store.read_index(kind="total_return")) > 4000
    assert len(store.members_on("2024-07-01")) == 300
    calls: list[Any] = []
    monkeypatch.setattr("oomrl.data.sample.ingest", lambda *a, **k: calls.append(a))
    assert ensure_sample(settings).root == store.root and calls == []


def test_cli_ingest_prints_what_it_stored(oomrl_home: Path) -> None:
    result = CliRunner().invoke(
        app, ["ingest", "--source", f"csv:{MAPPED}", "--universe", "600519"]
    )
    assert result.exit_code == 0, result.output
    assert "4 new in store" in result.output and "quarantined: 2 rows" in result.output
    assert "high_below_low" in result.output and "2024-07-06" in result.output


def test_cli_exits_1_with_a_clear_message(oomrl_home: Path, tmp_path: Path) -> None:
    (tmp_path / "600519.csv").write_bytes(b"\x00\xff\xfe broken")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "000300.csv").write_text("date,close\n2024-07-01,3478.18\n")
    result = CliRunner().invoke(app, ["ingest", "--source", f"csv:{tmp_path}", "--universe", "all"])
    assert result.exit_code == 1 and "600519.csv: unreadable CSV" in result.output
    missing = CliRunner().invoke(app, ["ingest", "--source", f"csv:{MAPPED.parent / 'nothing'}"])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_cli_reports_stale_data(oomrl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "--source", f"csv:{AKSHARE_STYLE}"]).exit_code == 0
    monkeypatch.setitem(
        __import__("oomrl.data.sources", fromlist=["SOURCES"]).SOURCES,
        "flaky",
        lambda arg: Unreachable(down=None),
    )
    result = runner.invoke(
        app, ["ingest", "--source", "flaky", "--start", "2024-07-01", "--end", "2024-07-26"]
    )
    assert (
        result.exit_code == 0
        and "STALE" in result.output
        and "failed 600000.SH: flaky: timeout" in result.output
    )


def _files(root: Path) -> dict[str, bytes]:
    """The store's files (but the lock file) by relative path: equal before and after means nothing
    changed."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != ".writer.lock"
    }


def test_a_bad_file_mid_folder_leaves_the_store_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MarketStore(tmp_path / "store")
    ingest(CsvSource(AKSHARE_STYLE), "600519", None, None, store)
    before = _files(store.root)
    folder = tmp_path / "csv"
    shutil.copytree(AKSHARE_STYLE, folder)
    (folder / "300750.SZ.csv").write_bytes(b"\x00\xff\xfe broken")
    # 000001.SZ is staged before 300750.SZ fails
    monkeypatch.setattr("oomrl.data.ingest.BATCH_SYMBOLS", 1)
    with pytest.raises(DataValidationError, match="300750.SZ.csv: unreadable CSV"):
        ingest(CsvSource(folder), "all", None, None, store)
    # No bars of 000001.SZ, no new index levels or membership, no record
    assert _files(store.root) == before


def test_every_fetch_failing_keeps_nothing_of_the_ingest(tmp_path: Path) -> None:
    store = MarketStore(tmp_path)
    ingest(CsvSource(AKSHARE_STYLE), "csi300", None, None, store)
    before = _files(tmp_path)
    # Index fine, every bar down
    report = ingest(Unreachable(down=None), "all", "2024-07-01", "2024-07-26", store)
    assert report.stale and len(report.failures) == 4
    # The flaky source's index levels and membership were not kept either
    assert _files(tmp_path) == before


def test_bars_after_the_last_closed_session_are_quarantined_and_kept(oomrl_home: Path) -> None:
    store = MarketStore(get_settings().store.data_dir)
    # 14:00 in Shanghai: the 07-03 session is still trading
    now = datetime(2024, 7, 3, 6, 0, tzinfo=UTC)
    report = ingest(CsvSource(AKSHARE_STYLE), "csi300", None, None, store, now=now)
    # 07-03..07-05 of 3 symbols and of the price and total-return index
    assert report.quarantine_reasons == {"future_session": 3 * 3 + 2 * 3}
    assert store.bar_summary()["last_date"] == pd.Timestamp("2024-07-02")
    assert store.read_index().index.max() == pd.Timestamp("2024-07-02")
    kept = store.quarantine("last")
    assert (
        len(kept) == 15
        and set(kept["table"]) == {"bars", "index"}
        and kept["ingest"].eq(report.ingest_id).all()
    )
    assert kept["reason"].str.startswith("future_session: 2024-07-0").all()
    shown = CliRunner().invoke(app, ["data", "quarantine"])
    assert shown.exit_code == 0, shown.output
    assert f"ingest {report.ingest_id}: 15 quarantined row(s)" in shown.output
    assert "2024-07-03  600519.SH            future_session: 2024-07-03 is after" in shown.output
    assert "600519.SH" in shown.output and "index 000300 price" in shown.output
    as_json = CliRunner().invoke(
        app, ["data", "quarantine", "--json", "--ingest", str(report.ingest_id)]
    )
    assert len(json.loads(as_json.output)) == 15
    unknown = CliRunner().invoke(app, ["data", "quarantine", "--ingest", "nope"])
    assert unknown.exit_code == 1 and "no ingest 'nope'" in unknown.output


def test_cli_ingest_waits_for_another_writer_or_refuses(oomrl_home: Path) -> None:
    store = MarketStore(get_settings().store.data_dir)
    with writer_elsewhere(store.root):
        refused = CliRunner().invoke(
            app, ["ingest", "--source", f"csv:{MAPPED}", "--universe", "600519", "--wait", "0"]
        )
    assert refused.exit_code == 1 and "is being written by pid" in refused.output
    assert "Traceback" not in refused.output and store.is_empty()


def test_cli_data_check_recovers_and_names_damaged_files(oomrl_home: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "--source", f"csv:{AKSHARE_STYLE}"]).exit_code == 0
    root = get_settings().store.data_dir
    sound = runner.invoke(app, ["data", "check"])
    assert (
        sound.exit_code == 0
        and "is sound: generation 1, 15 bars, 3 symbols, 2024-07-01..2024-07-05" in sound.output
    )
    # As a killed ingest leaves
    (root / "bars" / "2024" / "part-0000deadbeef.parquet").write_bytes(b"half")
    (root / ".writer.json").write_text(
        json.dumps({"pid": 99, "command": "oomrl ingest", "since": "09:00"})
    )
    recovered = runner.invoke(app, ["data", "check"])
    assert recovered.exit_code == 0 and "recovered: an earlier write by pid 99" in recovered.output
    assert "1 leftover file(s) were removed" in recovered.output
    next(root.glob("membership-*.parquet")).unlink()
    next(root.glob("index-*.parquet")).write_bytes(b"not parquet")
    damaged = runner.invoke(app, ["data", "check"])
    assert (
        damaged.exit_code == 1
        and "damaged: membership-" in damaged.output
        and ": missing" in damaged.output
    )
    assert "damaged: index-" in damaged.output and "unreadable" in damaged.output
    assert "Traceback" not in damaged.output


@pytest.mark.slow
def test_ensure_sample_waits_for_a_writer_and_finds_its_data(
    oomrl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = get_settings()
    store = MarketStore(settings.store.data_dir)
    calls: list[Any] = []
    monkeypatch.setattr("oomrl.data.sample.ingest", lambda *a, **k: calls.append(a))
    result: list[MarketStore] = []
    asked = threading.Event()
    opened = MarketStore.transaction
    with store.transaction() as tx:  # another process is filling the empty store
        # It found the store empty and asks for the lock we hold (no sleep: we wait until it asks).
        monkeypatch.setattr(
            MarketStore,
            "transaction",
            lambda self, *args, **kwargs: (asked.set(), opened(self, *args, **kwargs))[1],
        )
        worker = threading.Thread(target=lambda: result.append(ensure_sample(settings, wait=30)))
        worker.start()
        assert asked.wait(30)
        ingest(CsvSource(AKSHARE_STYLE), "600519", None, None, tx)
    worker.join(30)
    # It found the data: no second ingest
    assert result and not result[0].is_empty() and calls == []
