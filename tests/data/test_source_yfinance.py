"""The yfinance adapter running the real yf.download over canned Yahoo HTTP payloads (no network),
any market."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yfinance
from yfinance.data import YfData

from oomrl.data.sources.yfinance import YFinanceSource, yahoo_ticker
from oomrl.data.validation import validate_bars
from oomrl.errors import SourceUnavailableError
from tests.data.yahoo_http import FakeYahoo, chart


@pytest.fixture()
def yahoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeYahoo]]:
    """yf.download through FakeYahoo; yfinance's caches in a temporary folder."""
    yfinance.set_tz_cache_location(str(tmp_path / "yf-cache"))
    YfData.cache_get.cache_clear()  # yfinance memoizes past date ranges in-process
    FakeYahoo.requests_seen, FakeYahoo.down = [], False
    monkeypatch.setattr(YFinanceSource, "default_session", FakeYahoo)
    yield FakeYahoo


def chart_requests(yahoo: type[FakeYahoo]) -> list[dict[str, Any]]:
    return [
        r
        for r in yahoo.requests_seen
        if "/v8/finance/chart/" in r["url"] and "period1" in r["params"]
    ]


def test_download_goes_through_yahoo_http_and_keeps_the_price_by_ticker_shape(
    yahoo: type[FakeYahoo],
) -> None:
    frame = YFinanceSource(api=yfinance).download(["600519.SS"], date(2025, 3, 3), date(2025, 3, 5))
    assert frame.columns.names == ["Price", "Ticker"]
    assert {("Close", "600519.SS"), ("Adj Close", "600519.SS")} <= set(frame.columns)
    sent = chart_requests(yahoo)[0]
    assert (
        sent["url"].endswith("/v8/finance/chart/600519.SS")
        and sent["params"]["crumb"] == "canned-crumb"
    )
    # End made inclusive
    assert pd.Timestamp(sent["params"]["period2"], unit="s") > pd.Timestamp("2025-03-05")


def test_a_shares_are_stored_adjusted_with_the_factor(yahoo: type[FakeYahoo]) -> None:
    bars = YFinanceSource(api=yfinance).bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))
    raw = chart("600519.SS", {})["chart"]["result"][0]["indicators"]["quote"][0]
    assert bars["symbol"].unique().tolist() == ["600519.SH"]
    assert bars["date"].tolist() == list(pd.to_datetime(["2025-03-03", "2025-03-04", "2025-03-05"]))
    assert bars["volume"].tolist() == [float(v) for v in raw["volume"]]
    assert bars["amount"].isna().all() and bars["adjustment"].unique().tolist() == ["qfq"]
    # Traded = adjusted / factor
    np.testing.assert_allclose(bars["close"] / bars["factor"], raw["close"])
    assert (
        np.isnan(bars["prev_close_raw"].iloc[0])
        and bars["prev_close_raw"].iloc[1] == bars["close"].iloc[0]
    )
    assert validate_bars(bars).quarantined.empty


def test_us_bars_carry_the_dividend_in_the_factor(yahoo: type[FakeYahoo]) -> None:
    bars = YFinanceSource(api=yfinance).bars("aapl", date(2025, 1, 2), date(2025, 4, 30))
    assert bars["symbol"].unique().tolist() == ["AAPL"] and len(bars) > 70
    before, after = (
        bars.loc[bars["date"] < "2025-02-10", "factor"],
        bars.loc[bars["date"] >= "2025-02-10", "factor"],
    )
    assert after.round(6).eq(1.0).all() and (before < 1.0).all() and before.round(5).nunique() == 1
    assert validate_bars(bars).quarantined.empty  # XNYS sessions, no price limits, a Yahoo ticker


def test_index_levels_per_market(yahoo: type[FakeYahoo]) -> None:
    source = YFinanceSource(api=yfinance)
    csi = source.index_levels("000300", "price", date(2025, 3, 3), date(2025, 3, 5))
    assert (
        csi["close"].tolist()
        == chart("000300.SS", {})["chart"]["result"][0]["indicators"]["quote"][0]["close"]
    )
    spx = source.index_levels("^GSPC", "price", date(2025, 1, 2), date(2025, 4, 30))
    hsi = source.index_levels("^HSI", "price", date(2025, 1, 2), date(2025, 4, 30))
    assert spx["code"].unique().tolist() == ["^GSPC"] and hsi["code"].unique().tolist() == ["^HSI"]
    assert source.index_levels("000300", "total_return", date(2025, 3, 3), date(2025, 3, 5)).empty
    assert source.index_levels("^N225", "price", date(2025, 3, 3), date(2025, 3, 5)).empty
    assert source.membership().empty and source.coverage() is None


def test_hong_kong_bars(yahoo: type[FakeYahoo]) -> None:
    bars = YFinanceSource(api=yfinance).bars("0700.hk", date(2025, 1, 2), date(2025, 4, 30))
    assert bars["symbol"].unique().tolist() == ["0700.HK"] and validate_bars(bars).quarantined.empty


def test_connection_failure_is_source_unavailable(yahoo: type[FakeYahoo]) -> None:
    yahoo.down = True
    with pytest.raises(SourceUnavailableError, match="yfinance returned nothing"):
        YFinanceSource(api=yfinance).bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))


def test_an_unknown_ticker_is_source_unavailable(yahoo: type[FakeYahoo]) -> None:
    with pytest.raises(SourceUnavailableError):
        YFinanceSource(api=yfinance).bars("NOSUCH", date(2025, 3, 3), date(2025, 3, 5))


def test_exceptions_from_download_are_source_unavailable() -> None:
    class Broken:
        @staticmethod
        def download(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("YFRateLimitError: Too Many Requests")

    with pytest.raises(SourceUnavailableError, match="Too Many Requests"):
        YFinanceSource(api=Broken()).bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))


def test_a_frame_without_the_ticker_or_trades(
    yahoo: type[FakeYahoo], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = YFinanceSource(api=yfinance)
    other = source.download(["000300.SS"], date(2025, 3, 3), date(2025, 3, 5))
    monkeypatch.setattr(source, "download", lambda *args: other)
    with pytest.raises(SourceUnavailableError, match="no column for 600519.SS"):
        source.bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))
    blank = other.copy()
    for column in ("Open", "High", "Low", "Close"):
        blank.loc[:, (column, "000300.SS")] = np.nan
    blank.columns = pd.MultiIndex.from_tuples(
        [(p, "600519.SS") for p, _ in blank.columns], names=["Price", "Ticker"]
    )
    monkeypatch.setattr(source, "download", lambda *args: blank)
    assert source.bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5)).empty


def test_ticker_spelling_and_lazy_import() -> None:
    assert yahoo_ticker("600519") == "600519.SS" and yahoo_ticker("000001.SZ") == "000001.SZ"
    assert yahoo_ticker("aapl") == "AAPL" and yahoo_ticker("0700.HK") == "0700.HK"
    source = YFinanceSource()
    assert source._api is None and source.api is yfinance


@pytest.mark.slow
def test_cli_ingests_us_tickers_and_a_replay_trades_them_under_the_generic_rules(
    yahoo: type[FakeYahoo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from oomrl.data.store import MarketStore
    from oomrl.ops.cli import app
    from oomrl.portfolio.service import run_replay
    from oomrl.settings import get_settings

    monkeypatch.setenv("OOMRL_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(
        app,
        [
            "ingest",
            "--source",
            "yfinance",
            "--universe",
            "AAPL,MSFT",
            "--market",
            "us",
            "--start",
            "2025-01-02",
            "--end",
            "2025-04-30",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "quarantined: 0 rows" in result.output
    store = MarketStore(get_settings().store.data_dir)
    bars = store.read_bars()
    assert sorted(bars["symbol"].unique()) == ["AAPL", "MSFT"] and len(bars) > 140
    assert len(store.read_index("^GSPC")) > 70 and bars["factor"].notna().all()
    replayed = run_replay(
        get_settings(),
        "daily_momentum",
        date(2025, 2, 3),
        date(2025, 4, 30),
        store=store,
        params={"top_k": 2},
        market="us",
    )
    fills = replayed.fills
    # One-share lots, not A-share lots
    assert len(fills) > 20 and (fills["quantity"] % 100 != 0).any()
    buys, sells = fills[fills["side"] == "buy"], fills[fills["side"] == "sell"]
    assert (buys["stamp_duty"] == 0).all() and (fills["commission"] == 0).all()
    sale_value = sells["quantity"] * sells["price"]
    # SEC fee
    np.testing.assert_allclose(sells["stamp_duty"], (sale_value * 0.0000278).round(2), atol=0.011)
    # AAPL's and MSFT's dividends, from Adj Close / Close
    assert replayed.summary()["dividends"] > 0
    cli = CliRunner().invoke(
        app,
        [
            "replay",
            "--strategy",
            "daily_momentum",
            "--start",
            "2025-02-03",
            "--end",
            "2025-04-30",
            "--params",
            '{"top_k": 2}',
            "--market",
            "us",
            "--json",
        ],
    )
    assert cli.exit_code == 0, cli.output
    summary = json.loads(cli.output)[0]
    assert (
        summary["net_return"] == pytest.approx(replayed.summary()["net_return"])
        and summary["rebalances"] > 20
    )


def test_a_us_ingest_refuses_the_csi300_universe_and_a_bad_market(
    yahoo: type[FakeYahoo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from oomrl.ops.cli import app

    monkeypatch.setenv("OOMRL_HOME", str(tmp_path / "home"))
    refused = CliRunner().invoke(
        app,
        [
            "ingest",
            "--source",
            "yfinance",
            "--market",
            "us",
            "--start",
            "2025-01-02",
            "--end",
            "2025-04-30",
        ],
    )
    assert refused.exit_code == 1 and "csi300 is an A-share universe" in refused.output
    unknown = CliRunner().invoke(
        app, ["ingest", "--source", "yfinance", "--universe", "AAPL", "--market", "mars"]
    )
    # A usage error
    assert unknown.exit_code == 2 and "'mars' is not one of 'cn', 'us', 'hk'" in unknown.output
