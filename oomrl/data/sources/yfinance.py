"""Live bars through yfinance (yf.download, MultiIndex columns Price x Ticker, `.SS`/`.SZ` tickers, volume in shares)."""

from __future__ import annotations

from datetime import date, timedelta
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from oomrl.data.schema import conform_bars, conform_index, empty_bars, empty_index, with_prev_close
from oomrl.errors import SourceUnavailableError
from oomrl.market.boards import to_symbol

INDEX_TICKERS = {"000300": "000300.SS"}
"""Yahoo carries the CSI 300 price index; it has no total-return series and no constituents."""


def yahoo_ticker(symbol: str) -> str:
    """600519.SH -> 600519.SS, 000001.SZ -> 000001.SZ (Yahoo spells Shanghai `.SS`)."""
    return to_symbol(symbol).replace(".SH", ".SS")


class YFinanceSource:
    """Daily bars from yf.download(auto_adjust=True): prices dividend/split-adjusted back from the latest day (qfq)."""

    name = "yfinance"
    live = True

    def __init__(self, api: ModuleType | Any = None) -> None:
        self._api = api

    @property
    def api(self) -> Any:
        if self._api is None:
            import yfinance

            self._api = yfinance
        return self._api

    def coverage(self) -> None:
        return None

    def download(self, tickers: list[str], start: date, end: date) -> pd.DataFrame:
        """yf.download with columns grouped (Price, Ticker); `end` is inclusive here (yfinance's is exclusive)."""
        try:
            frame = self.api.download(tickers, start=pd.Timestamp(start).strftime("%Y-%m-%d"),
                                      end=(pd.Timestamp(end) + timedelta(days=1)).strftime("%Y-%m-%d"),
                                      auto_adjust=True, group_by="column", progress=False, threads=False,
                                      multi_level_index=True)
        except Exception as exc:  # yfinance wraps transport errors in its own and curl_cffi's types
            raise SourceUnavailableError(f"yfinance download {tickers}: {exc}") from exc
        if frame is None or frame.empty:
            raise SourceUnavailableError(f"yfinance returned nothing for {tickers} (network failure or unknown ticker)")
        return frame

    @staticmethod
    def _columns(frame: pd.DataFrame, ticker: str) -> pd.DataFrame:
        """One ticker's OHLCV from the (Price, Ticker) MultiIndex, rows where Yahoo had no trade dropped."""
        if ticker not in frame.columns.get_level_values("Ticker"):
            raise SourceUnavailableError(f"yfinance returned no column for {ticker}")
        one = frame.xs(ticker, axis=1, level="Ticker")
        return one.dropna(subset=["Open", "High", "Low", "Close"], how="all")

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        ticker = yahoo_ticker(symbol)
        one = self._columns(self.download([ticker], start, end), ticker)
        if one.empty:
            return empty_bars()
        frame = pd.DataFrame({
            "date": one.index, "symbol": to_symbol(symbol),
            "open": one["Open"].to_numpy(), "high": one["High"].to_numpy(), "low": one["Low"].to_numpy(),
            "close": one["Close"].to_numpy(), "volume": one["Volume"].to_numpy(dtype=np.float64),
            "amount": np.nan, "adjustment": "qfq", "prev_close_raw": np.nan,
        })
        return with_prev_close(conform_bars(frame))

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        ticker = INDEX_TICKERS.get(code)
        if kind != "price" or ticker is None:
            return empty_index()
        one = self._columns(self.download([ticker], start, end), ticker)
        return conform_index(pd.DataFrame({"date": one.index, "code": code, "close": one["Close"].to_numpy(),
                                           "kind": kind}))

    def membership(self) -> pd.DataFrame:
        """Yahoo has no index constituents: ingest with --universe csi300 uses the stored membership."""
        return pd.DataFrame(columns=["effective_date", "symbol", "name"])
