"""Helpers strategies share: momentum, top-k picks, equal weights, weight checks, ISO weeks."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import date
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from strategy_api.view import MarketView

WEIGHT_TOLERANCE = 1e-9


def _series_maker() -> Callable[[np.ndarray, pd.Index], pd.Series]:
    """What makes `pd.Series(values, index=index)` from a float array and an Index in hand.

    pandas' own block manager when this pandas builds the same Series through it (a quarter of the
    constructor's time, which mostly infers what its arguments are), else the constructor.
    """

    def plain(values: np.ndarray, index: pd.Index) -> pd.Series:
        return pd.Series(values, index=index)

    try:
        from pandas.core.internals import SingleBlockManager

        def fast(values: np.ndarray, index: pd.Index) -> pd.Series:
            series = pd.Series._from_mgr(SingleBlockManager.from_array(values, index), axes=None)
            object.__setattr__(series, "_name", None)  # what the constructor sets last
            return series

        probe, labels = np.array([0.5, np.nan, -1.0]), pd.Index(["a", "b", "c"], dtype=object)
        made, expected = fast(probe, labels), plain(probe, labels)
        if (
            type(made) is pd.Series
            and vars(made).keys() == vars(expected).keys()
            and made.index is labels
            and made.name is None
            and made.attrs == expected.attrs
            and made.dtype == expected.dtype
            and made.equals(expected)
            and np.shares_memory(made.to_numpy(), probe)
            == np.shares_memory(expected.to_numpy(), probe)
        ):
            return fast
    except Exception:  # noqa: BLE001, S110 - another pandas: its public constructor
        pass
    return plain


_series = _series_maker()


def momentum(view: MarketView, lookback: int, skip: int = 0) -> pd.Series:
    """Percentage change of close over `lookback` sessions, ending `skip` sessions before as_of."""
    if lookback < 1 or skip < 0:
        raise ValueError(f"need lookback >= 1 and skip >= 0, got {lookback}, {skip}")
    rows = lookback + skip + 1
    close = view.values("close")
    if len(close) < rows:
        return pd.Series(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = close[-1 - skip] / close[-rows] - 1.0
    finite = np.isfinite(change)
    if finite.all():  # the symbols' own index: no filtered copy to build
        return _series(change, view.symbols)
    return _series(change[finite], view.symbols[finite])


def top_k(scores: pd.Series, k: int, among: Iterable[str] | None = None) -> list[str]:
    """Labels of the k highest scores (NaN never picked; ties keep the order of `among`, else of
    `scores`).

    The same picks as `scores.reindex(among).dropna().sort_values(ascending=False, kind="stable")
    .index[:k]`, without building the intermediate series.
    """
    if among is None:  # only the picked labels are taken out of the index
        values = scores.to_numpy(dtype=float)
        kept = np.flatnonzero(~np.isnan(values))
        order = kept[np.argsort(-values[kept], kind="stable")[:k]]
        return cast(list[str], scores.index.to_numpy()[order].tolist())
    known = dict(zip(scores.index.tolist(), scores.to_numpy(dtype=float).tolist(), strict=True))
    labels = [symbol for symbol in among if symbol in known]
    values = np.array([known[symbol] for symbol in labels], dtype=float)
    kept = ~np.isnan(values)
    if not kept.all():
        labels, values = [s for s, keep in zip(labels, kept, strict=True) if keep], values[kept]
    return [labels[i] for i in np.argsort(-values, kind="stable")[:k]]


def equal_weights(symbols: list[str], gross: float) -> dict[str, float]:
    """Equal weights summing to `gross` over `symbols` (empty when there are none)."""
    if not symbols:
        return {}
    weight = gross / len(symbols)
    return {symbol: weight for symbol in symbols}


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Validate long-only weights (>= 0, finite, sum <= 1) and drop zeros."""
    cleaned: dict[str, float] = {}
    for symbol, weight in weights.items():
        finite = math.isfinite(weight) if isinstance(weight, float) else np.isfinite(weight)
        if not finite or weight < -WEIGHT_TOLERANCE:
            raise ValueError(f"weight of {symbol} must be finite and >= 0, got {weight}")
        if weight > WEIGHT_TOLERANCE:
            cleaned[symbol] = float(weight)
    total = sum(cleaned.values())
    if total > 1.0 + WEIGHT_TOLERANCE:
        raise ValueError(f"weights sum to {total:.6f} > 1 (long-only, no leverage)")
    return cleaned


def iso_week(day: date) -> tuple[int, int]:
    """ISO (year, week) of a date."""
    year, week, _ = pd.Timestamp(day).isocalendar()
    return int(year), int(week)
