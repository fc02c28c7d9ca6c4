"""Live A-share data through akshare (Eastmoney bars, CSI index levels, csindex constituents).

Lots become shares here. With adjust qfq/hfq the adapter also fetches the unadjusted bars. So each
row carries Qlib's factor (adjusted = raw x factor). `stock_individual_info_em` gives the listing
date and today's name. Its ST/*ST prefix sets the risk-warning flag of the latest session. Earlier
sessions' status is unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import requests

# The same names csv.py imports: each source conforms its frames through the one schema.
from oomrl.data.schema import (
    SHARES_PER_LOT,
    conform_bars,
    conform_index,
    conform_membership,
    empty_bars,
    empty_index,
)
from oomrl.errors import SourceUnavailableError
from oomrl.market.boards import risk_warning, symbol_or_text, to_symbol
from oomrl.market.calendar import last_completed_session

NETWORK_ERRORS: tuple[type[BaseException], ...] = (requests.RequestException, OSError)
"""Transport failures: the task layer retries these with backoff."""
RESPONSE_ERRORS: tuple[type[BaseException], ...] = (KeyError, TypeError, ValueError, IndexError)
"""akshare parses JSON/Excel without checks; a changed or empty payload surfaces as one of these."""
TOTAL_RETURN_CODES = {"000300": "H00300"}
ADJUST_NAMES = {"qfq": "qfq", "hfq": "hfq", "": "none", "none": "none"}


def _ymd(day: date) -> str:
    return str(pd.Timestamp(day).strftime("%Y%m%d"))


class AkshareSource:
    """stock_zh_a_hist (qfq/hfq/raw) for bars, index_zh_a_hist for CSI 300.

    The csindex pages give H00300 and members. `api` is the akshare module (injected in tests).
    Otherwise it is imported on first use.
    """

    name = "akshare"
    live = True

    # The optional library is imported on first use, so a machine without it can still start.
    def __init__(self, adjust: str = "qfq", api: ModuleType | Any = None) -> None:
        if adjust not in ADJUST_NAMES:
            raise ValueError(f"akshare adjust must be qfq, hfq or none, not {adjust!r}")
        self.adjust = "" if adjust == "none" else adjust
        self._api = api

    @property
    def api(self) -> Any:
        if self._api is None:
            import akshare

            self._api = akshare
        return self._api

    def _call(
        self, what: str, function: Callable[..., pd.DataFrame], **kwargs: Any
    ) -> pd.DataFrame:
        try:
            return function(**kwargs)
        except NETWORK_ERRORS as exc:
            raise SourceUnavailableError(f"akshare {what}: network error: {exc}") from exc
        except RESPONSE_ERRORS as exc:
            raise SourceUnavailableError(
                f"akshare {what}: unexpected response ({type(exc).__name__}: {exc})"
            ) from exc

    def coverage(self) -> None:
        return None

    def _hist(self, code: str, start: date, end: date, adjust: str) -> pd.DataFrame:
        label = (
            f"stock_zh_a_hist({code})"
            if adjust == self.adjust
            else f"stock_zh_a_hist({code}, unadjusted)"
        )
        return self._call(
            label,
            self.api.stock_zh_a_hist,
            symbol=code,
            period="daily",
            start_date=_ymd(start),
            end_date=_ymd(end),
            adjust=adjust,
        )

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        """Daily bars; 成交量 is in lots (x100 to shares), 成交额 in CNY, prev close = 收盘 -
        涨跌额 (same basis)."""
        code = to_symbol(symbol)[:6]
        raw = self._hist(code, start, end, self.adjust)
        if raw.empty:
            return empty_bars()
        dates = pd.to_datetime(raw["日期"])
        if self.adjust:
            traded = self._hist(code, start, end, "")
            unadjusted = (
                pd.Series(
                    traded["收盘"].to_numpy(dtype=float), index=pd.to_datetime(traded["日期"])
                )
                if len(traded)
                else pd.Series(dtype=float)
            )
            factor = raw["收盘"].to_numpy(dtype=float) / unadjusted.reindex(dates).to_numpy()
        else:
            factor = 1.0
        info = self.info(code)
        frame = pd.DataFrame(
            {
                "date": dates,
                "symbol": to_symbol(code),
                "open": raw["开盘"],
                "high": raw["最高"],
                "low": raw["最低"],
                "close": raw["收盘"],
                "volume": raw["成交量"].astype("float64") * SHARES_PER_LOT,
                "amount": raw["成交额"].astype("float64"),
                "adjustment": ADJUST_NAMES[self.adjust],
                "prev_close_raw": raw["收盘"] - raw["涨跌额"],
                "factor": factor,
                "st": np.nan,
                "list_date": info.get("list_date", np.nan),
            }
        )
        if "name" in info and frame["date"].iloc[-1] == last_completed_session(datetime.now(UTC)):
            # Today's name
            frame.loc[frame.index[-1], "st"] = 1.0 if risk_warning(info["name"]) else 0.0
        return conform_bars(frame)

    def info(self, code: str) -> dict[str, Any]:
        """Listing date (YYYYMMDD) and today's name from stock_individual_info_em; {} when it cannot
        say."""
        try:
            raw = self._call(
                f"stock_individual_info_em({code})", self.api.stock_individual_info_em, symbol=code
            )
        except SourceUnavailableError:
            return {}  # the bars stand without it: listing age and ST status stay unknown
        items = dict(zip(raw["item"], raw["value"], strict=True))
        found: dict[str, Any] = {}
        listed = pd.to_numeric(pd.Series([items.get("上市时间")]), errors="coerce").iloc[0]
        if pd.notna(listed) and 19_900_101 <= listed <= 21_000_101:
            found["list_date"] = float(listed)
        if isinstance(items.get("股票简称"), str):
            found["name"] = items["股票简称"]
        return found

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        """CSI 300 price levels (Eastmoney) or its total-return index H00300 (csindex.com.cn)."""
        if kind == "total_return":
            tr_code = TOTAL_RETURN_CODES.get(code)
            if tr_code is None:
                return empty_index()
            raw = self._call(
                f"stock_zh_index_hist_csindex({tr_code})",
                self.api.stock_zh_index_hist_csindex,
                symbol=tr_code,
                start_date=_ymd(start),
                end_date=_ymd(end),
            )
        else:
            raw = self._call(
                f"index_zh_a_hist({code})",
                self.api.index_zh_a_hist,
                symbol=code,
                period="daily",
                start_date=_ymd(start),
                end_date=_ymd(end),
            )
        if raw.empty:
            return empty_index()
        return conform_index(
            pd.DataFrame({"date": raw["日期"], "code": code, "close": raw["收盘"], "kind": kind})
        )

    def membership(self) -> pd.DataFrame:
        """Today's CSI 300 constituents (csindex closeweight file); effective as of the file's
        日期."""
        raw = self._call(
            "index_stock_cons_weight_csindex(000300)",
            self.api.index_stock_cons_weight_csindex,
            symbol="000300",
        )
        return conform_membership(
            pd.DataFrame(
                {
                    "effective_date": raw["日期"],
                    "symbol": raw["成分券代码"].map(symbol_or_text),
                    "name": raw["成分券名称"],
                }
            )
        )
