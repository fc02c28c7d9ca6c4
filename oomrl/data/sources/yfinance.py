"""Live bars through yfinance for any Yahoo ticker: A-shares (`.SS`/`.SZ`), US, Hong Kong, ...

For example `AAPL` (US) or `0700.HK` (Hong Kong). yf.download(auto_adjust=False) gives Yahoo's
traded prices (Open/High/Low/Close; split-adjusted only) and Adj Close (dividends too). The adapter
stores the adjusted prices with Qlib's factor: adjusted = raw x factor, factor = Adj Close / Close.
Volume is in shares; there is no amount. Benchmarks per market: 000300 (CSI 300, `000300.SS`),
^GSPC (S&P 500), ^HSI (Hang Seng).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from oomrl.data.schema import conform_bars, conform_index, empty_bars, empty_index, with_prev_close
from oomrl.errors import SourceUnavailableError
from oomrl.market import markets

INDEX_TICKERS = {"000300": "000300.SS", "^GSPC": "^GSPC", "^HSI": "^HSI"}
"""Yahoo carries these price indices; it has no total-return series and no constituents."""


def yahoo_ticker(symbol: str) -> str:
    """600519.SH -> 600519.SS, 000001.SZ -> 000001.SZ, AAPL -> AAPL, 0700.HK -> 0700.HK."""
    return markets.yahoo_ticker(markets.normalize(symbol))


class YFinanceSource:
    """Daily bars from yf.download(auto_adjust=False): adjusted prices with the factor Adj Close /
    Close."""

    name = "yfinance"
    live = True
    # A requests/curl_cffi session factory for yf.download (None: yfinance's own); tests and proxies
    # set it.
    default_session: ClassVar[Callable[[], Any] | None] = None

    def __init__(self, api: ModuleType | Any = None, session: Any = None) -> None:
        self._api = api
        self._session = session

    @property
    def api(self) -> Any:
        if self._api is None:
            import yfinance

            self._api = yfinance
        return self._api

    def coverage(self) -> None:
        return None

    def download(self, tickers: list[str], start: date, end: date) -> pd.DataFrame:
        """yf.download with columns grouped (Price, Ticker); `end` is inclusive here (yfinance's is
        exclusive)."""
        factory = type(self).default_session  # read off the class: a plain function stays unbound
        session = self._session or (factory() if factory else None)
        extra = {"session": session} if session is not None else {}
        try:
            frame = self.api.download(
                tickers,
                start=pd.Timestamp(start).strftime("%Y-%m-%d"),
                end=(pd.Timestamp(end) + timedelta(days=1)).strftime("%Y-%m-%d"),
                auto_adjust=False,
                group_by="column",
                progress=False,
                threads=False,
                multi_level_index=True,
                **extra,
            )
        except Exception as exc:  # yfinance wraps transport errors in its own and curl_cffi's types
            raise SourceUnavailableError(f"yfinance download {tickers}: {exc}") from exc
        if frame is None or frame.empty:
            raise SourceUnavailableError(
                f"yfinance returned nothing for {tickers} (network failure or unknown ticker)"
            )
        return frame

    @staticmethod
    def _columns(frame: pd.DataFrame, ticker: str) -> pd.DataFrame:
        """One ticker's OHLCV from the (Price, Ticker) MultiIndex.

        Rows where Yahoo had no trade are dropped."""
        if ticker not in frame.columns.get_level_values("Ticker"):
            raise SourceUnavailableError(f"yfinance returned no column for {ticker}")
        one = frame.xs(ticker, axis=1, level="Ticker")
        return one.dropna(subset=["Open", "High", "Low", "Close"], how="all")

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        canonical = markets.normalize(symbol)
        ticker = markets.yahoo_ticker(canonical)
        one = self._columns(self.download([ticker], start, end), ticker)
        if one.empty:
            return empty_bars()
        close = one["Close"].to_numpy(dtype=np.float64)
        adjusted = one["Adj Close"].to_numpy(dtype=np.float64) if "Adj Close" in one else close
        with np.errstate(invalid="ignore", divide="ignore"):
            factor = np.where(close > 0, adjusted / close, np.nan)
        frame = pd.DataFrame(
            {
                "date": pd.DatetimeIndex(one.index).tz_localize(None)
                if getattr(one.index, "tz", None)
                else one.index,
                "symbol": canonical,
                **{
                    column.lower(): one[column].to_numpy(dtype=np.float64) * factor
                    for column in ("Open", "High", "Low", "Close")
                },
                "volume": one["Volume"].to_numpy(dtype=np.float64),
                "amount": np.nan,
                "adjustment": "qfq",
                "prev_close_raw": np.nan,
                "factor": factor,
            }
        )
        return with_prev_close(conform_bars(frame))

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        ticker = INDEX_TICKERS.get(code)
        if kind != "price" or ticker is None:
            return empty_index()
        one = self._columns(self.download([ticker], start, end), ticker)
        return conform_index(
            pd.DataFrame(
                {"date": one.index, "code": code, "close": one["Close"].to_numpy(), "kind": kind}
            )
        )

    def membership(self) -> pd.DataFrame:
        """Yahoo has no index constituents: ingest with --universe csi300 uses the stored
        membership."""
        return pd.DataFrame(columns=["effective_date", "symbol", "name"])
