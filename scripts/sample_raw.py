"""Raw (traded) price levels for the bundled sample, recovered from the shared panels (used by
build_sample.py).

Three sources give raw closes, in order of preference:
1. `panel_akshare_hist_2020_2024` is stock_zh_a_hist(adjust="") itself: raw prices. Its `change`
   column is measured from the previous raw close, not the ex-rights reference, so ex-dates are
   found where adjusted / raw steps by more than the adjusted prices' rounding can explain.
2. `panel_baostock_qfq` holds forward-adjusted prices *unrounded* (10 decimals): adjusted = raw x r
   with r constant between ex-dates, so r is the ratio that puts open, high, low and close of a day
   on the 0.01 CNY grid at once.
3. `panel_yfinance_2025-03_2026-02` comes from yf.download(auto_adjust=True), which multiplies
   Yahoo's raw open/high/low by Adj Close / Close: the same grid search recovers r, up to the
   float32 precision of Yahoo's numbers.
The grid search keeps the current r while it fits each new day and otherwise picks, among the
ratios that fit the day, the one that keeps fitting the longest: a wrong ratio fits a day's four
prices by chance only at high prices, and never for long.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

REL_TOL = 1.5e-7  # relative slack: float32 prices carry up to ~6e-8
HORIZON = 40  # sessions looked ahead to choose between ratios that fit one day
MIN_RATIO = 0.2  # adjusted / raw below this is not searched (no sample name is adjusted that far)
PANEL_AK = "panel_akshare_hist_2020_2024"
PANEL_BAO = "panel_baostock_qfq"
PANEL_YF = "panel_yfinance_2025-03_2026-02"
PRICES = ("open", "high", "low", "close")
RAW_COLUMNS = ["date", *(f"raw_{k}" for k in PRICES), "segment", "source"]


def fits(prices: np.ndarray, ratio: float) -> bool:
    """True when prices / ratio all lie on the 0.01 grid (within float32 slack)."""
    cents = np.asarray(prices) / ratio * 100
    slack = max(float(np.abs(cents).max()) * REL_TOL, 1e-6)
    return bool(np.all(np.abs(cents - np.round(cents)) <= slack))


def candidate_ratios(prices: np.ndarray) -> np.ndarray:
    """Every ratio close / c (c a whole number of fen) that puts the day's open, high and low on the
    grid."""
    close = float(prices[3])
    fen = np.arange(
        max(int(np.floor(close * 100 * 0.999)), 1), int(np.ceil(close * 100 / MIN_RATIO)) + 1
    )
    ratios = close * 100 / fen
    keep = np.ones(len(fen), dtype=bool)
    for value in prices[:3]:
        cents = value / ratios * 100
        keep &= np.abs(cents - np.round(cents)) <= np.maximum(np.abs(cents) * REL_TOL, 1e-6)
    return ratios[keep]


def infer_ratio(ohlc: np.ndarray) -> np.ndarray:
    """Adjusted/raw ratio per day (piecewise constant) from unrounded adjusted OHLC rows; NaN where
    none fits."""
    count = len(ohlc)
    out = np.full(count, np.nan)
    current = np.nan
    for i in range(count):
        if np.isfinite(current) and fits(ohlc[i], current):
            out[i] = current
            continue
        best, longest = np.nan, -1
        for ratio in candidate_ratios(ohlc[i]):
            run = 0
            for j in range(i + 1, min(count, i + HORIZON)):
                if not fits(ohlc[j], ratio):
                    break
                run += 1
            if run > longest:
                best, longest = ratio, run
        current = best
        out[i] = current
    return out


def _segments(ratio: pd.Series) -> pd.Series:
    """Segment number per day: a new segment starts where the ratio steps (an ex-date)."""
    step = (ratio / ratio.shift(1) - 1).abs() > 1e-6
    return step.cumsum()


def from_akshare(path: Path) -> pd.DataFrame:
    """Raw closes from stock_zh_a_hist(adjust=""); segments are found later against the adjusted
    prices."""
    frame = pd.read_csv(path, encoding="utf-8-sig", parse_dates=["date"]).sort_values("date")
    return pd.DataFrame(
        {
            "date": frame["date"],
            **{f"raw_{k}": frame[k] for k in PRICES},
            "segment": -1,
            "source": "akshare-raw",
        }
    )


def rounding_segments(adjusted: pd.Series, raw: pd.Series) -> pd.Series:
    """Segments of adjusted / raw where both are rounded to the fen: a step beyond the rounding is
    an ex-date."""
    ratio = adjusted / raw
    noise = 0.0051 / adjusted + 0.0051 / adjusted.shift(1) + 0.0051 / raw + 0.0051 / raw.shift(1)
    return ((ratio / ratio.shift(1) - 1).abs() > noise + 1e-5).cumsum()


def from_adjusted(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Raw closes and ex-date segments from unrounded adjusted OHLC (baostock qfq, yfinance
    auto_adjust)."""
    ordered = frame.sort_values("date").reset_index(drop=True)
    ratio = pd.Series(infer_ratio(ordered[["open", "high", "low", "close"]].to_numpy(dtype=float)))
    known = ratio.notna()
    raw = {f"raw_{k}": (ordered[k] / ratio).round(2)[known] for k in PRICES}
    return pd.DataFrame(
        {
            "date": ordered["date"][known],
            **raw,
            "segment": _segments(ratio)[known],
            "source": source,
        }
    )


def raw_closes(src: Path, code: str) -> pd.DataFrame:
    """Raw prices of one code by date from every source that has them (RAW_COLUMNS).

    A day known from several sources takes the first of akshare-raw, baostock, yfinance; segment
    numbers are made distinct per source.
    """
    parts = []
    ak = src / PANEL_AK / f"{code}.csv"
    if ak.exists():
        parts.append(from_akshare(ak))
    prefix = "sh" if code.startswith(("6", "9")) else "sz"
    bao = src / PANEL_BAO / f"{prefix}{code}.csv"
    if bao.exists():
        frame = pd.read_csv(bao, parse_dates=["date"])
        parts.append(from_adjusted(frame[frame["date"] >= "2019-01-01"], "baostock-qfq"))
    yf = src / PANEL_YF / f"{code}.csv"
    if yf.exists():
        frame = pd.read_csv(yf, skiprows=[1], parse_dates=["Date"]).rename(columns=str.lower)
        parts.append(from_adjusted(frame, "yfinance"))
    if not parts:
        return pd.DataFrame(columns=RAW_COLUMNS)
    for number, part in enumerate(parts):
        part["segment"] = part["source"] + ":" + part["segment"].astype(str) + f":{number}"
    merged = pd.concat(parts, ignore_index=True)
    return merged.drop_duplicates("date", keep="first").sort_values("date").reset_index(drop=True)


def factors(adjusted_close: pd.Series, raw: pd.DataFrame) -> tuple[pd.Series, float]:
    """Piecewise-constant factor (adjusted / raw) per date of `adjusted_close`, NaN where no raw
    close is known.

    Within a segment (between two ex-dates) the factor is the median of adjusted / raw, which
    removes the rounding of 2-decimal adjusted prices. Also returns the share of known days on which
    round(adjusted / factor, 2) gives back the raw close exactly.
    """
    joined = raw.set_index("date").join(adjusted_close.rename("adjusted"), how="inner")
    joined = joined[joined["adjusted"].notna() & (joined["raw_close"] > 0)]
    if joined.empty:
        return pd.Series(np.nan, index=adjusted_close.index), 1.0
    akshare = joined["source"] == "akshare-raw"
    if akshare.any():
        found = rounding_segments(joined.loc[akshare, "adjusted"], joined.loc[akshare, "raw_close"])
        joined.loc[akshare, "segment"] = "akshare:" + found.astype(str)
    per_day = joined["adjusted"] / joined["raw_close"]
    factor = per_day.groupby(joined["segment"]).transform("median")
    exact = float(((joined["adjusted"] / factor).round(2) == joined["raw_close"].round(2)).mean())
    return factor.reindex(adjusted_close.index), exact
