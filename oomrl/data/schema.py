"""The one bar schema every source produces and the store keeps, and helpers to conform frames."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np
import pandas as pd

from oomrl.errors import DataValidationError

BAR_COLUMNS: tuple[str, ...] = (
    "date",  # datetime64[ns], tz-naive session date
    "symbol",  # str, 6-digit code + exchange, e.g. 600519.SH
    "open",  # float64, CNY per share on `adjustment` basis
    "high",  # float64
    "low",  # float64
    "close",  # float64
    "volume",  # float64, SHARES (sources in lots are multiplied by 100 at the boundary)
    "amount",  # float64, CNY traded; NaN when the source has none
    "adjustment",  # str: "none" | "qfq" | "hfq".
    # float64, the previous close the price limit applies to, on this row's price basis. That is
    # the unadjusted close for adjustment "none". For qfq/hfq it is the adjusted previous close,
    # which keeps the day's return and hence limit moves. NaN when unknown. Divided by `factor`
    # it is the exchange's reference price (the ex-rights price on an ex-date).
    "prev_close_raw",
    # float64, Qlib's adjustment factor: adjusted price = raw price x factor. So the raw (traded)
    # price is open/high/low/close / factor. 1.0 for unadjusted rows; NaN unknown.
    "factor",
    # float64, 1.0 when the security is under risk warning (ST or *ST) that day, 0.0 when not.
    # NaN when unknown (treated as not ST).
    "st",
    # float64, the listing (or relisting) date as the number YYYYMMDD. NaN when unknown (treated
    # as long listed). The first sessions after it may trade without limits.
    "list_date",
)

INDEX_COLUMNS: tuple[str, ...] = ("date", "code", "close", "kind")  # kind: "price" | "total_return"
MEMBERSHIP_COLUMNS: tuple[str, ...] = ("effective_date", "symbol", "name")

BENCHMARK_CODE = "000300"
ADJUSTMENTS: frozenset[str] = frozenset({"none", "qfq", "hfq"})
INDEX_KINDS: frozenset[str] = frozenset({"price", "total_return"})
PRICE_FIELDS: tuple[str, ...] = ("open", "high", "low", "close")
FLOAT_FIELDS: tuple[str, ...] = (
    *PRICE_FIELDS,
    "volume",
    "amount",
    "prev_close_raw",
    "factor",
    "st",
    "list_date",
)
STATUS_FIELDS: tuple[str, ...] = ("factor", "st", "list_date")
"""Columns a source may not know: absent from a frame they are NaN (unknown), never an error."""
SHARES_PER_LOT = 100
NANOS_PER_DAY = 86_400 * 10**9


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise DataValidationError(
            f"{what} frame is missing column(s) {', '.join(missing)}; has "
            f"{', '.join(map(str, frame.columns))}"
        )


def parse_dates(values: Any) -> pd.Series:
    """Dates from text or datetimes, unparseable ones NaT.

    ISO 8601 (and what pandas reads as such) is parsed at vector speed, anything else one by one.
    Never pandas' "could not infer format" warning. A single bad first row of a CSV would
    otherwise print it to stderr."""
    series = (
        values
        if isinstance(values, pd.Series)
        else pd.Series(np.ravel(np.asarray(values, dtype=object)))
    )
    parsed = pd.to_datetime(series, errors="coerce", format="ISO8601")
    retry = parsed.isna().to_numpy() & series.notna().to_numpy()
    if retry.any():
        parsed = parsed.where(
            ~retry, pd.to_datetime(series.where(retry), errors="coerce", format="mixed")
        )
    return parsed


def _dates(values: pd.Series) -> pd.Series:
    """Tz-naive normalized datetime64[ns]; unparseable values become NaT (rejected per row
    later)."""
    parsed = values if pd.api.types.is_datetime64_dtype(values) else parse_dates(values)
    if getattr(parsed.dt, "tz", None) is not None:
        parsed = parsed.dt.tz_localize(None)
    return parsed.dt.normalize().astype("datetime64[ns]")


def _floats(values: pd.Series) -> np.ndarray:
    return cast(np.ndarray, pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64))


def _strings(values: pd.Series) -> np.ndarray:
    return cast(np.ndarray, values.astype(str).to_numpy())


def _conform(
    frame: pd.DataFrame,
    columns: tuple[str, ...],
    what: str,
    converters: dict[str, Callable[[pd.Series], Any]],
    optional: tuple[str, ...] = (),
) -> pd.DataFrame:
    _require_columns(frame, [name for name in columns if name not in optional], what)
    source = frame.reset_index(drop=True)
    for name in optional:
        if name not in source.columns:
            source = source.assign(**{name: np.nan})
    return pd.DataFrame({name: converters.get(name, _floats)(source[name]) for name in columns})


def _already_bars(frame: pd.DataFrame) -> bool:
    """True when the frame already has exactly the schema columns and dtypes (sources conform
    once)."""
    if tuple(frame.columns) != BAR_COLUMNS or not isinstance(frame.index, pd.RangeIndex):
        return False
    dtypes = frame.dtypes
    if not (
        dtypes["date"] == "datetime64[ns]"
        and dtypes["symbol"] == np.dtype(object)
        and dtypes["adjustment"] == np.dtype(object)
        and all(dtypes[name] == np.float64 for name in FLOAT_FIELDS)
    ):
        return False
    nanos = frame["date"].to_numpy().view("int64")
    # Midnight dates only (no NaT, no intraday times)
    return bool((nanos % NANOS_PER_DAY == 0).all())


def conform_bars(frame: pd.DataFrame) -> pd.DataFrame:
    """Bars in schema order and dtypes. Non-numeric values become NaN, so validation can name the
    row.

    Raises DataValidationError when a required column is missing: the whole batch is unusable.
    """
    if _already_bars(frame):
        return frame
    return _conform(
        frame,
        BAR_COLUMNS,
        "bar",
        {"date": _dates, "symbol": _strings, "adjustment": _strings},
        optional=STATUS_FIELDS,
    )


def conform_index(frame: pd.DataFrame) -> pd.DataFrame:
    """Index levels in schema order and dtypes (date, code, close, kind)."""

    def code(values: pd.Series) -> np.ndarray:
        # CSI codes are six digits: a leading zero lost in a CSV comes back. Yahoo's (^GSPC) stay
        # as given.
        return cast(
            np.ndarray,
            values.astype(str)
            .map(lambda text: text.zfill(6) if text.isdigit() else text)
            .to_numpy(),
        )

    return _conform(frame, INDEX_COLUMNS, "index", {"date": _dates, "code": code, "kind": _strings})


def conform_membership(frame: pd.DataFrame) -> pd.DataFrame:
    """Membership rows (effective_date, symbol, name) with parsed dates."""

    def name(values: pd.Series) -> np.ndarray:
        return cast(np.ndarray, values.fillna("").astype(str).to_numpy())

    return _conform(
        frame,
        MEMBERSHIP_COLUMNS,
        "membership",
        {"effective_date": _dates, "symbol": _strings, "name": name},
    )


def empty_bars() -> pd.DataFrame:
    """A zero-row bar frame with the schema's dtypes."""
    frame = pd.DataFrame({name: pd.Series(dtype="float64") for name in BAR_COLUMNS})
    frame["date"] = frame["date"].astype("datetime64[ns]")
    frame["symbol"] = frame["symbol"].astype(object)
    frame["adjustment"] = frame["adjustment"].astype(object)
    return frame


def yyyymmdd(values: Any) -> np.ndarray:
    """Dates as the float YYYYMMDD the `list_date` column holds (NaT -> NaN)."""
    stamps = pd.DatetimeIndex(parse_dates(values))
    numbers = (stamps.year * 10000 + stamps.month * 100 + stamps.day).to_numpy(dtype=np.float64)
    return np.where(stamps.isna(), np.nan, numbers).reshape(np.shape(values))


def from_yyyymmdd(values: Any) -> np.ndarray:
    """The `list_date` numbers back to datetime64[ns] (NaN -> NaT)."""
    numbers = np.asarray(values, dtype=np.float64)
    flat = np.ravel(numbers)
    known = np.isfinite(flat)
    out = np.full(flat.shape, np.datetime64("NaT"), dtype="datetime64[ns]")
    if known.any():
        # A panel repeats each listing date on every row: parse each distinct number once.
        distinct, where = np.unique(flat[known].astype(np.int64), return_inverse=True)
        text = pd.Series(distinct.astype(str))
        out[known] = pd.to_datetime(text, format="%Y%m%d", errors="coerce").to_numpy()[where]
    return out.reshape(numbers.shape)


def empty_index() -> pd.DataFrame:
    """A zero-row index-level frame with the schema's dtypes."""
    return conform_index(pd.DataFrame(columns=list(INDEX_COLUMNS)))


def with_prev_close(frame: pd.DataFrame) -> pd.DataFrame:
    """Fill missing prev_close_raw with the previous bar's close of the same symbol (same basis).

    Used where a source has no unadjusted prices. On a qfq basis the previous close is the
    ex-rights reference the exchange applies limits to. So limit checks on returns stay right up
    to tick rounding.
    """
    ordered = frame.sort_values(["symbol", "date"], kind="mergesort")
    previous = ordered.groupby("symbol", sort=False)["close"].shift(1)
    # A second row of the same symbol and date takes the previous *session's* close. So does the
    # first. Identical copies stay identical, so validation keeps one of them (not neither).
    copy = (
        ordered["symbol"].eq(ordered["symbol"].shift())
        & ordered["date"].eq(ordered["date"].shift())
    ).to_numpy()
    if copy.any():
        previous = (
            previous.mask(copy)
            .groupby([ordered["symbol"], ordered["date"]], sort=False, dropna=False)
            .ffill()
        )
    filled = ordered["prev_close_raw"].where(ordered["prev_close_raw"].notna(), previous)
    out = frame.copy()
    out.loc[ordered.index, "prev_close_raw"] = filled.to_numpy(dtype=np.float64)
    return out
