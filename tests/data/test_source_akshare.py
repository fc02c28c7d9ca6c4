"""The akshare adapter on frames made by the real akshare functions, fed canned HTTP payloads (no
network)."""

from __future__ import annotations

import io
from datetime import date
from typing import Any

import akshare
import openpyxl
import pandas as pd
import pytest
import requests

from oomrl.data.sources.akshare import AkshareSource
from oomrl.data.validation import validate_bars
from oomrl.errors import SourceUnavailableError

# Eastmoney kline rows: 日期,开盘,收盘,最高,最低,成交量(lots),成交额(CNY),振幅,涨跌幅,涨跌额,换手率
STOCK_KLINES = [
    "2024-07-01,1460.00,1450.00,1470.00,1440.00,30000,4370000000.00,2.05,-0.68,-10.00,0.24",
    "2024-07-02,1449.00,1440.50,1455.00,1436.00,25000,3610000000.00,1.31,-0.66,-9.50,0.20",
    "2024-07-03,1441.00,1480.00,1488.00,1440.00,40000,5860000000.00,3.33,2.74,39.50,0.32",
]
RAW_KLINES = [  # the same days unadjusted (fqt=0): a 24.81 CNY dividend after them makes qfq lower
    "2024-07-01,1484.81,1474.81,1494.81,1464.81,30000,4370000000.00,2.05,-0.68,-10.00,0.24",
    "2024-07-02,1473.81,1465.31,1479.81,1460.81,25000,3610000000.00,1.31,-0.66,-9.50,0.20",
    "2024-07-03,1465.81,1504.81,1512.81,1464.81,40000,5860000000.00,3.33,2.74,39.50,0.32",
]
# push2.eastmoney.com/api/qt/stock/get, what stock_individual_info_em reads (f58 name, f189 listing
# date)
INFO = {
    "1.600519": {
        "f57": "600519",
        "f58": "贵州茅台",
        "f84": 1256197800.0,
        "f85": 1256197800.0,
        "f127": "酿酒行业",
        "f116": 1.86e12,
        "f117": 1.86e12,
        "f189": 20010827,
        "f43": 1480.0,
    },
    "0.000004": {
        "f57": "000004",
        "f58": "*ST国华",
        "f84": 1.3e8,
        "f85": 1.2e8,
        "f127": "软件开发",
        "f116": 1.0e9,
        "f117": 1.0e9,
        "f189": 19910114,
        "f43": 7.5,
    },
}
INDEX_KLINES = [
    "2024-07-01,3461.88,3478.18,3480.00,3450.00,120000000,200000000000.00,0.87,0.48,16.61,0.50",
    "2024-07-02,3475.00,3470.00,3482.00,3465.00,110000000,190000000000.00,0.49,-0.24,-8.18,0.45",
]
CSINDEX_ROWS = [  # fields of csindex index-perf, in the order akshare renames them
    {
        "tradeDate": "20240701",
        "indexCode": "H00300",
        "indexNameCnAll": "沪深300全收益",
        "indexNameCn": "300收益",
        "indexNameEnAll": "CSI 300 TR",
        "indexNameEn": "CSI 300 TR",
        "open": 5100.0,
        "high": 5120.0,
        "low": 5080.0,
        "close": 5110.55,
        "change": 20.0,
        "changePct": 0.4,
        "tradingVol": 1.2e6,
        "tradingValue": 2.0e7,
        "consNumber": 300,
        "peg": 12.1,
    },
    {
        "tradeDate": "20240702",
        "indexCode": "H00300",
        "indexNameCnAll": "沪深300全收益",
        "indexNameCn": "300收益",
        "indexNameEnAll": "CSI 300 TR",
        "indexNameEn": "CSI 300 TR",
        "open": 5110.0,
        "high": 5115.0,
        "low": 5090.0,
        "close": 5098.12,
        "change": -12.4,
        "changePct": -0.24,
        "tradingVol": 1.1e6,
        "tradingValue": 1.9e7,
        "consNumber": 300,
        "peg": 12.0,
    },
]


def _closeweight_xlsx() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(
        [
            "日期Date",
            "指数代码",
            "指数名称",
            "指数英文名称",
            "成分券代码",
            "成分券名称",
            "成分券英文名称",
            "交易所",
            "交易所英文名称",
            "权重(%)weight",
        ]
    )
    sheet.append(
        [
            "20250630",
            "000300",
            "沪深300",
            "CSI 300",
            "600519",
            "贵州茅台",
            "Kweichow Moutai",
            "上海证券交易所",
            "Shanghai Stock Exchange",
            4.3,
        ]
    )
    sheet.append(
        [
            "20250630",
            "000300",
            "沪深300",
            "CSI 300",
            "1",
            "平安银行",
            "Ping An Bank",
            "深圳证券交易所",
            "Shenzhen Stock Exchange",
            0.5,
        ]
    )
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


class FakeResponse:
    def __init__(self, payload: Any = None, content: bytes = b"") -> None:
        self._payload, self.content, self.status_code = payload, content, 200

    def json(self) -> Any:
        return self._payload


@pytest.fixture()
def http(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Route akshare's requests.get to canned payloads by URL (and Eastmoney secid); records the
    calls."""
    calls: dict[str, Any] = {"params": []}

    def fake_get(url: str, params: dict[str, Any] | None = None, **kwargs: Any) -> FakeResponse:
        calls["params"].append(params or {})
        if "kline" in url:
            secid, fqt = (params or {})["secid"], (params or {}).get("fqt")
            klines = {
                "1.600519": RAW_KLINES if fqt == "0" else STOCK_KLINES,
                "1.000300": INDEX_KLINES,
                "0.000004": STOCK_KLINES,
            }.get(secid, [])
            return FakeResponse({"data": {"klines": klines} if klines else None})
        if "qt/stock/get" in url:
            data = INFO.get((params or {})["secid"])
            return FakeResponse(
                {"rc": 0, "rt": 4, "svr": 181669437, "lt": 1, "full": 1, "dlmkts": "", "data": data}
            )
        if "index-perf" in url:
            return FakeResponse({"data": CSINDEX_ROWS})
        if "closeweight" in url:
            return FakeResponse(content=_closeweight_xlsx())
        raise AssertionError(f"unexpected URL {url}")

    monkeypatch.setattr(requests, "get", fake_get)
    monkeypatch.setattr(akshare.index.index_zh_em, "index_code_id_map_em", lambda: {"000300": 1})
    return calls


def test_stock_bars_lots_become_shares_and_prev_close_comes_from_the_change(
    http: dict[str, Any],
) -> None:
    source = AkshareSource(adjust="qfq", api=akshare)
    bars = source.bars("600519.SH", date(2024, 7, 1), date(2024, 7, 3))
    sent = http["params"][0]
    assert (sent["secid"], sent["fqt"], sent["beg"], sent["end"]) == (
        "1.600519",
        "1",
        "20240701",
        "20240703",
    )
    assert bars["symbol"].unique().tolist() == ["600519.SH"] and bars[
        "adjustment"
    ].unique().tolist() == ["qfq"]
    assert bars["volume"].tolist() == [3_000_000.0, 2_500_000.0, 4_000_000.0]  # 成交量 lots x 100
    assert bars["amount"].iloc[0] == 4_370_000_000.0
    assert bars["prev_close_raw"].tolist() == [1460.0, 1450.0, 1440.5]  # 收盘 - 涨跌额
    assert bars["date"].dtype == "datetime64[ns]"
    assert validate_bars(bars).quarantined.empty
    # Both series are fetched: the factor is qfq close / raw close; the listing date comes from the
    # info call.
    assert [p.get("fqt") for p in http["params"] if "fqt" in p] == ["1", "0"]
    assert bars["factor"].round(6).tolist() == [
        round(1450.0 / 1474.81, 6),
        round(1440.5 / 1465.31, 6),
        round(1480.0 / 1504.81, 6),
    ]
    # A past window
    assert bars["list_date"].unique().tolist() == [20010827.0] and bars["st"].isna().all()


def test_todays_name_sets_the_st_flag_of_the_latest_session(
    http: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import oomrl.data.sources.akshare as adapter

    monkeypatch.setattr(adapter, "last_completed_session", lambda now: pd.Timestamp("2024-07-03"))
    bars = AkshareSource(adjust="none", api=akshare).bars(
        "000004.SZ", date(2024, 7, 1), date(2024, 7, 3)
    )
    # *ST国华 today
    assert bars["st"].isna().tolist() == [True, True, False] and bars["st"].iloc[-1] == 1.0
    assert bars["factor"].eq(1.0).all() and bars["list_date"].iloc[0] == 19910114.0
    moutai = AkshareSource(adjust="qfq", api=akshare).bars(
        "600519.SH", date(2024, 7, 1), date(2024, 7, 3)
    )
    assert moutai["st"].iloc[-1] == 0.0


def test_a_missing_info_answer_leaves_listing_and_status_unknown(http: dict[str, Any]) -> None:
    source = AkshareSource(adjust="none", api=akshare)
    assert "0.000001" not in INFO and source.info("000001") == {}  # Eastmoney answered without data


def test_unadjusted_and_hfq_requests(http: dict[str, Any]) -> None:
    AkshareSource(adjust="none", api=akshare).bars("600519", date(2024, 7, 1), date(2024, 7, 3))
    raw = AkshareSource(adjust="hfq", api=akshare).bars(
        "600519.SH", date(2024, 7, 1), date(2024, 7, 3)
    )
    assert [p["fqt"] for p in http["params"] if "fqt" in p] == ["0", "2", "0"]
    assert raw["adjustment"].iloc[0] == "hfq"
    with pytest.raises(ValueError, match="qfq, hfq or none"):
        AkshareSource(adjust="forward")


def test_no_data_is_an_empty_frame(http: dict[str, Any]) -> None:
    assert AkshareSource(api=akshare).bars("000001.SZ", date(2024, 7, 1), date(2024, 7, 3)).empty


def test_price_and_total_return_index(http: dict[str, Any]) -> None:
    source = AkshareSource(api=akshare)
    price = source.index_levels("000300", "price", date(2024, 7, 1), date(2024, 7, 2))
    assert price["close"].tolist() == [3478.18, 3470.0] and price["kind"].unique().tolist() == [
        "price"
    ]
    total = source.index_levels("000300", "total_return", date(2024, 7, 1), date(2024, 7, 2))
    assert total["close"].tolist() == [5110.55, 5098.12] and total["code"].unique().tolist() == [
        "000300"
    ]
    assert http["params"][-1]["indexCode"] == "H00300"
    assert source.index_levels("000905", "total_return", date(2024, 7, 1), date(2024, 7, 2)).empty
    assert source.coverage() is None


def test_an_empty_index_answer_is_an_empty_frame() -> None:
    class NoRows:
        @staticmethod
        def index_zh_a_hist(**kwargs: Any) -> pd.DataFrame:
            return pd.DataFrame()

    assert (
        AkshareSource(api=NoRows())
        .index_levels("000300", "price", date(2024, 7, 1), date(2024, 7, 2))
        .empty
    )


def test_membership_from_the_closeweight_file(http: dict[str, Any]) -> None:
    members = AkshareSource(api=akshare).membership()
    assert members["symbol"].tolist() == ["600519.SH", "000001.SZ"]
    assert members["effective_date"].unique().tolist() == [pd.Timestamp("2025-06-30")]
    assert members["name"].iloc[0] == "贵州茅台"


def test_network_errors_become_source_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise requests.ConnectionError("connection refused")

    monkeypatch.setattr(requests, "get", refuse)
    with pytest.raises(SourceUnavailableError, match=r"stock_zh_a_hist\(600519\): network error"):
        AkshareSource(api=akshare).bars("600519.SH", date(2024, 7, 1), date(2024, 7, 3))


def test_a_changed_payload_is_reported_not_crashed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "get", lambda *a, **k: FakeResponse({"data": {"unexpected": 1}}))
    with pytest.raises(SourceUnavailableError, match="unexpected response"):
        AkshareSource(api=akshare).index_levels(
            "000300", "total_return", date(2024, 7, 1), date(2024, 7, 2)
        )


def test_the_module_is_imported_lazily() -> None:
    source = AkshareSource()
    assert source._api is None and source.api is akshare
