"""Offline sources: csv:DIR (aliases, mapping, units, unreadable files), synthetic, the bundled
sample, the registry."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.data.sources import SOURCES, MarketSource, get_source
from oomrl.data.sources.csv import CsvSource, read_csv_file
from oomrl.data.sources.sample import SampleSource
from oomrl.data.sources.synthetic import SyntheticSource, synthetic_symbols
from oomrl.data.validation import validate_bars
from oomrl.errors import DataValidationError, OomrlError
from oomrl.market.boards import Board, board_of
from tests.conftest import FIXTURES

AKSHARE_STYLE = FIXTURES / "data" / "csv_akshare_style"
MAPPED = FIXTURES / "data" / "csv_mapped"
WEEK = (date(2024, 7, 1), date(2024, 7, 5))


def test_csv_chinese_headers_lots_and_file_name_spellings() -> None:
    source = CsvSource(AKSHARE_STYLE)
    assert source.symbols() == ["000001.SZ", "300750.SZ", "600519.SH"]
    bars = source.bars("000001.SZ", *WEEK)
    assert bars["volume"].iloc[0] == pytest.approx(134_305_149.0)  # 1,343,051.49 lots x 100
    assert (
        bars["adjustment"].unique().tolist() == ["qfq"]
        and bars["amount"].iloc[0] == 1_372_549_620.0
    )
    assert np.isnan(bars["prev_close_raw"].iloc[0]) and bars["prev_close_raw"].iloc[1] == 9.62
    assert validate_bars(bars).quarantined.empty
    assert source.coverage() == WEEK
    assert source.bars("601318.SH", *WEEK).empty
    assert len(source.bars("600519.SH", date(2024, 7, 3), date(2024, 7, 4))) == 2


def test_csv_index_and_membership() -> None:
    source = CsvSource(AKSHARE_STYLE)
    assert len(source.index_levels("000300", "price", *WEEK)) == 5
    assert source.index_levels("000300", "total_return", *WEEK)["close"].gt(0).all()
    assert source.index_levels("000905", "price", *WEEK).empty
    members = source.membership()
    assert members["symbol"].tolist() == ["600519.SH", "000001.SZ", "300750.SZ"]


def test_csv_column_mapping_keeps_bad_rows_for_quarantine() -> None:
    source = CsvSource(MAPPED)
    bars = source.bars("600519.SH", date(2024, 7, 1), date(2024, 7, 8))
    assert len(bars) == 6 and bars["adjustment"].iloc[0] == "none" and bars["amount"].isna().all()
    result = validate_bars(bars)
    assert sorted(result.reasons) == ["high_below_low", "non_session", "outside_range"]
    assert len(result.quarantined) == 2
    assert source.membership().empty


def test_csv_unreadable_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "600519.csv").write_bytes(b"\xff\xfe\x00garbage\x00\x81")
    with pytest.raises(DataValidationError, match=r"600519\.csv: unreadable CSV"):
        CsvSource(tmp_path).bars("600519.SH", *WEEK)


def test_csv_file_gone_between_listing_and_reading(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match=r"600519\.csv: file not found"):
        read_csv_file(tmp_path / "600519.csv")


def test_csv_missing_column_and_bad_names(tmp_path: Path) -> None:
    (tmp_path / "600519.csv").write_text("date,open,high,low,close\n2024-07-01,1,1,1,1\n")
    with pytest.raises(DataValidationError, match="no column for 'volume'.*source.toml"):
        CsvSource(tmp_path).bars("600519.SH", *WEEK)
    (tmp_path / "notes.csv").write_text("x\n1\n")
    with pytest.raises(DataValidationError, match="notes.csv: file name is not a stock code"):
        CsvSource(tmp_path).symbols()


def test_csv_empty_file_and_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "600519.csv").write_text("")
    with pytest.raises(DataValidationError, match="unreadable CSV.*EmptyDataError"):
        CsvSource(tmp_path).bars("600519.SH", *WEEK)
    with pytest.raises(DataValidationError, match="does not exist"):
        CsvSource(tmp_path / "nowhere")


def test_csv_layout_errors(tmp_path: Path) -> None:
    (tmp_path / "source.toml").write_text("volume_unit = 'boxes'\n")
    with pytest.raises(DataValidationError, match="volume_unit must be shares\\|lots"):
        CsvSource(tmp_path)
    (tmp_path / "source.toml").write_text("volume_unit = \n")
    with pytest.raises(DataValidationError, match="cannot read .*source.toml"):
        CsvSource(tmp_path)


def test_csv_membership_needs_its_columns(tmp_path: Path) -> None:
    (tmp_path / "membership.csv").write_text("when,code\n2024-06-17,600519\n")
    with pytest.raises(DataValidationError, match="needs columns effective_date and symbol"):
        CsvSource(tmp_path).membership()
    assert CsvSource(tmp_path).coverage() is None


def test_synthetic_is_seeded_valid_and_realistic() -> None:
    source = SyntheticSource(symbols=20, start="2023-01-03", days=500, seed=3)
    first, again = (
        source.bars(source.symbols()[5], *source.coverage()),
        SyntheticSource(symbols=20, start="2023-01-03", days=500, seed=3).bars(
            source.symbols()[5], *source.coverage()
        ),
    )
    pd.testing.assert_frame_equal(first, again)
    frames = pd.concat(
        [source.bars(sym, *source.coverage()) for sym in source.symbols()], ignore_index=True
    )
    assert validate_bars(frames).quarantined.empty
    returns = frames.groupby("symbol")["close"].pct_change().dropna()
    assert 0.01 < returns.std() < 0.05
    assert len(frames) < 20 * 500  # suspensions leave gaps
    limit_days = frames["close"].eq(frames["high"]) & (
        frames["close"] / frames["prev_close_raw"] - 1 > 0.095
    )
    assert limit_days.any()
    assert source.bars("999999.SH", *source.coverage()).empty
    price = source.index_levels("000300", "price", *source.coverage())
    total = source.index_levels("000300", "total_return", *source.coverage())
    assert len(price) == 500 and (total["close"].iloc[-1] > price["close"].iloc[-1])
    assert source.membership()["symbol"].tolist() == source.symbols()


def test_synthetic_symbols_cover_the_boards() -> None:
    boards = [board_of(sym) for sym in synthetic_symbols(10)]
    assert (
        boards.count(Board.MAIN) == 7
        and boards.count(Board.CHINEXT) == 2
        and boards.count(Board.STAR) == 1
    )
    with pytest.raises(ValueError, match="the synthetic source has 1 to 5000 symbols, not 0"):
        SyntheticSource(symbols=0)


@pytest.mark.slow
def test_sample_source_reads_the_bundle() -> None:
    source = SampleSource()
    first, last = source.coverage()
    assert first <= date(2005, 1, 4) and last == date(2026, 2, 27)
    assert "600519.SH" in source.symbols() and len(source.symbols()) > 300
    bars = source.bars("600519.SH", date(2024, 7, 1), date(2024, 7, 5))
    assert len(bars) == 5 and bars["adjustment"].unique().tolist() == ["qfq"]
    # Haitong: no panel has it
    assert source.bars("600837.SH", date(2024, 7, 1), date(2024, 7, 5)).empty
    assert source.index_levels("000300", "price", date(2024, 7, 1), date(2024, 7, 1))[
        "close"
    ].item() == pytest.approx(3478.18, abs=0.01)
    assert source.membership()["effective_date"].nunique() == 8


def test_sample_source_with_a_broken_bundle(tmp_path: Path) -> None:
    (tmp_path / "bars.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataValidationError, match="cannot read sample file .*bars.parquet"):
        SampleSource(tmp_path).symbols()
    with pytest.raises(DataValidationError, match="membership.csv is missing"):
        SampleSource(tmp_path).membership()


def test_registry_builds_every_source(tmp_path: Path) -> None:
    assert isinstance(get_source("sample"), SampleSource)
    assert get_source("akshare:hfq").adjust == "hfq"
    assert get_source("yfinance").name == "yfinance"
    assert get_source(f"csv:{AKSHARE_STYLE}").folder == AKSHARE_STYLE
    assert len(get_source("synthetic:12").symbols()) == 12
    for name in SOURCES:
        assert isinstance(
            get_source(f"csv:{AKSHARE_STYLE}" if name == "csv" else name), MarketSource
        )
    with pytest.raises(OomrlError, match="unknown data source 'bloomberg'"):
        get_source("bloomberg")
    with pytest.raises(OomrlError, match="needs a folder"):
        get_source("csv")
    with pytest.raises(
        OomrlError,
        match="the synthetic source takes a number of symbols: --source synthetic:N, not 'abc'",
    ):
        get_source("synthetic:abc")
