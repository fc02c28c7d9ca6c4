"""A fake Yahoo Finance over HTTP: a requests.Session that answers yfinance's own requests with
canned payloads.

The real yf.download runs end to end (cookie and crumb, time zone lookup, chart request, parsing,
adjustment, the (Price, Ticker) frame); only the transport is replaced. Payloads are the JSON files
in tests/fixtures/yahoo (Yahoo's v8 chart shape), served per ticker and cut to period1..period2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import requests

PAYLOADS = Path(__file__).resolve().parents[1] / "fixtures" / "yahoo"


class FakeYahoo(requests.Session):
    """Routes yfinance's GETs: fc.yahoo.com (cookie), getcrumb (crumb), v8/finance/chart/<ticker>
    (data)."""

    requests_seen: ClassVar[list[dict[str, Any]]] = []
    down: ClassVar[bool] = False

    def request(
        self, method: str | bytes, url: str | bytes, params: Any = None, **kwargs: Any
    ) -> requests.Response:
        url = str(url)
        FakeYahoo.requests_seen.append({"url": url, "params": dict(params or {})})
        if FakeYahoo.down:
            raise requests.ConnectionError(
                "Failed to perform, curl: (7) Couldn't connect to server"
            )
        response = requests.Response()
        response.status_code, response.url = 200, url
        response.headers["content-type"] = "application/json"
        if "getcrumb" in url:
            response._content = b"canned-crumb"
        elif "/v8/finance/chart/" in url:
            response._content = json.dumps(chart(url.rsplit("/", 1)[1], params or {})).encode()
        else:
            response._content = b""
        return response


def chart(ticker: str, params: dict[str, Any]) -> dict[str, Any]:
    """The canned chart of `ticker` between period1 and period2 (all of it for a range query)."""
    path = PAYLOADS / f"{ticker}.json"
    if not path.exists():
        return {
            "chart": {
                "result": None,
                "error": {
                    "code": "Not Found",
                    "description": "No data found, symbol may be delisted",
                },
            }
        }
    body = json.loads(path.read_text())
    result = body["chart"]["result"][0]
    lo, hi = int(params.get("period1", 0)), int(params.get("period2", 2**62))
    keep = [i for i, stamp in enumerate(result["timestamp"]) if lo <= stamp < hi]
    quote = result["indicators"]["quote"][0]
    result["timestamp"] = [result["timestamp"][i] for i in keep]
    result["indicators"]["quote"][0] = {k: [v[i] for i in keep] for k, v in quote.items()}
    adj = result["indicators"]["adjclose"][0]["adjclose"]
    result["indicators"]["adjclose"][0]["adjclose"] = [adj[i] for i in keep]
    return body
