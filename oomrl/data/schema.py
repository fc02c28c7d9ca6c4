"""The one bar schema every source produces and the store keeps."""

from __future__ import annotations

BAR_COLUMNS: tuple[str, ...] = (
    "date",        # datetime64[ns], tz-naive session date
    "symbol",      # str, 6-digit code + exchange, e.g. 600519.SH
    "open",        # float64, CNY per share on `adjustment` basis
    "high",        # float64
    "low",         # float64
    "close",       # float64
    "volume",      # float64, SHARES (sources in lots are multiplied by 100 at the boundary)
    "amount",      # float64, CNY traded; NaN when the source has none
    "adjustment",  # str: "none" | "qfq" | "hfq"
    "prev_close_raw",  # float64, unadjusted previous close where known (price limits), else NaN
)

INDEX_COLUMNS: tuple[str, ...] = ("date", "code", "close", "kind")  # kind: "price" | "total_return"
MEMBERSHIP_COLUMNS: tuple[str, ...] = ("effective_date", "symbol", "name")

BENCHMARK_CODE = "000300"
