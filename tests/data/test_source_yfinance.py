"""The yfinance adapter on frames assembled by the real yf.download from canned per-ticker histories (no network)."""

from __future__ import annotations

from datetime import date
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
import yfinance
import yfinance.multi

from oomrl.data.sources.yfinance import YFinanceSource, yahoo_ticker
from oomrl.data.validation import validate_bars
from oomrl.errors import SourceUnavailableError

DATES = pd.DatetimeIndex(["2025-03-03", "2025-03-04", "2025-03-05"], name="Date").tz_localize("Asia/Shanghai")
HISTORY = {  # what Ticker.history(auto_adjust=True, actions=False) returns: float prices, int64 volume in shares
    "600519.SS": pd.DataFrame({"Open": [1488.1, 1490.2, 1501.0], "High": [1495.0, 1502.3, 1512.8],
                               "Low": [1480.5, 1485.0, 1496.1], "Close": [1490.0, 1500.1, 1510.2],
                               "Volume": np.array([3_012_345, 2_800_000, 3_500_000], dtype=np.int64)}, index=DATES),
    "000300.SS": pd.DataFrame({"Open": [3900.0, 3910.0, 3905.0], "High": [3920.0, 3930.0, 3925.0],
                               "Low": [3890.0, 3900.0, 3895.0], "Close": [3915.3, 3905.1, 3920.7],
                               "Volume": np.array([10**10, 10**10, 10**10], dtype=np.int64)}, index=DATES),
}


class FakeTicker:
    """Stands in for yfinance.Ticker inside yf.download: returns HISTORY, or fails like a dropped connection."""

    requests: ClassVar[list[dict[str, Any]]] = []
    fail: ClassVar[bool] = False

    def __init__(self, ticker: str) -> None:
        self.ticker, self._price_history = ticker, None

    def history(self, **kwargs: Any) -> pd.DataFrame:
        FakeTicker.requests.append({"ticker": self.ticker, **kwargs})
        if FakeTicker.fail:
            raise ConnectionError("Failed to perform, curl: (7) Couldn't connect to server")
        return HISTORY[self.ticker].copy()


@pytest.fixture()
def yahoo(monkeypatch: pytest.MonkeyPatch) -> type[FakeTicker]:
    FakeTicker.requests, FakeTicker.fail = [], False
    monkeypatch.setattr(yfinance.multi, "Ticker", FakeTicker)
    return FakeTicker


def test_download_shape_is_price_by_ticker(yahoo: type[FakeTicker]) -> None:
    frame = YFinanceSource(api=yfinance).download(["600519.SS"], date(2025, 3, 3), date(2025, 3, 5))
    assert frame.columns.names == ["Price", "Ticker"]
    assert ("Close", "600519.SS") in frame.columns
    assert yahoo.requests[0]["auto_adjust"] is True
    assert (yahoo.requests[0]["start"], yahoo.requests[0]["end"]) == ("2025-03-03", "2025-03-06")  # end exclusive


def test_bars_are_qfq_in_shares_with_prev_close(yahoo: type[FakeTicker]) -> None:
    bars = YFinanceSource(api=yfinance).bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))
    assert bars["symbol"].unique().tolist() == ["600519.SH"]
    assert bars["date"].tolist() == list(pd.to_datetime(["2025-03-03", "2025-03-04", "2025-03-05"]))
    assert bars["volume"].tolist() == [3_012_345.0, 2_800_000.0, 3_500_000.0]
    assert bars["amount"].isna().all() and bars["adjustment"].unique().tolist() == ["qfq"]
    assert np.isnan(bars["prev_close_raw"].iloc[0]) and bars["prev_close_raw"].iloc[1] == 1490.0
    assert validate_bars(bars).quarantined.empty


def test_index_levels_price_only(yahoo: type[FakeTicker]) -> None:
    source = YFinanceSource(api=yfinance)
    levels = source.index_levels("000300", "price", date(2025, 3, 3), date(2025, 3, 5))
    assert levels["close"].tolist() == [3915.3, 3905.1, 3920.7]
    assert source.index_levels("000300", "total_return", date(2025, 3, 3), date(2025, 3, 5)).empty
    assert source.membership().empty and source.coverage() is None


def test_connection_failure_is_source_unavailable(yahoo: type[FakeTicker]) -> None:
    yahoo.fail = True
    with pytest.raises(SourceUnavailableError, match="yfinance returned nothing"):
        YFinanceSource(api=yfinance).bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))


def test_exceptions_from_download_are_source_unavailable() -> None:
    class Broken:
        @staticmethod
        def download(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("YFRateLimitError: Too Many Requests")

    with pytest.raises(SourceUnavailableError, match="Too Many Requests"):
        YFinanceSource(api=Broken()).bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))


def test_a_frame_without_the_ticker_or_trades(yahoo: type[FakeTicker], monkeypatch: pytest.MonkeyPatch) -> None:
    source = YFinanceSource(api=yfinance)
    other = source.download(["000300.SS"], date(2025, 3, 3), date(2025, 3, 5))
    monkeypatch.setattr(source, "download", lambda *args: other)
    with pytest.raises(SourceUnavailableError, match="no column for 600519.SS"):
        source.bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5))
    blank = other.copy()
    blank.loc[:, ("Close", "000300.SS")] = np.nan
    for column in ("Open", "High", "Low"):
        blank.loc[:, (column, "000300.SS")] = np.nan
    blank.columns = pd.MultiIndex.from_tuples([(p, "600519.SS") for p, _ in blank.columns], names=["Price", "Ticker"])
    monkeypatch.setattr(source, "download", lambda *args: blank)
    assert source.bars("600519.SH", date(2025, 3, 3), date(2025, 3, 5)).empty


def test_ticker_spelling_and_lazy_import() -> None:
    assert yahoo_ticker("600519") == "600519.SS" and yahoo_ticker("000001.SZ") == "000001.SZ"
    source = YFinanceSource()
    assert source._api is None and source.api is yfinance
