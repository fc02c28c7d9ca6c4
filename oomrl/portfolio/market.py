"""Market arrays the broker needs, computed once per panel: raw prices, limits, lots, ADV,
volatility, corporate actions.

Prices arrive adjusted with a `factor` panel (Qlib's convention: adjusted = raw x factor). The
broker trades, sizes lots, charges fees and checks limits on raw prices. Raw is adjusted / factor,
rounded to the tick. Strategies see the adjusted panels. A change of factor between two sessions
is a corporate action (dividend or share change). It keeps the book's value on adjusted returns.
Where the factor is unknown, the nearest known one of the same symbol is used. So an unknown
stretch has no spurious corporate action, and `factor_known` says where that happened. Without
any factor, raw = adjusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from typing import Literal, cast

import numpy as np
import pandas as pd
from pandas.api.indexers import BaseIndexer

from oomrl.data.schema import from_yyyymmdd
from oomrl.errors import DataValidationError
from oomrl.market import calendar, limits
from oomrl.market.rules import AShareRules, FillPrice, FrictionRules
from oomrl.portfolio.actions import Actions

PANEL_FIELDS = (
    "open",
    "high",
    "low",
    "close",
    "volume",
    "amount",
    "prev_close_raw",
    "factor",
    "st",
    "list_date",
)
STRATEGY_FIELDS = ("open", "high", "low", "close", "volume", "amount")
NO_ACTION = 1e-9  # factor ratios closer to 1 than this are float noise, not a corporate action


def panels_from_bars(bars: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Pivot long bars (BAR_COLUMNS) into date x symbol panels, one per field."""
    missing = {"date", "symbol", "close"} - set(bars.columns)
    if missing:
        raise DataValidationError(f"bars lack columns {sorted(missing)}")
    if bars.duplicated(["date", "symbol"]).any():
        raise DataValidationError("bars hold duplicate (date, symbol) rows")
    frame = bars.assign(date=pd.to_datetime(bars["date"]).dt.normalize())
    panels: dict[str, pd.DataFrame] = {}
    for field in PANEL_FIELDS:
        if field in frame.columns:
            panel = frame.pivot(index="date", columns="symbol", values=field).sort_index()
            panels[field] = panel.astype(float)
    return panels


def to_tick(prices: np.ndarray, tick: float, factor: np.ndarray | None = None) -> np.ndarray:
    """Round prices to the market's tick, half away from zero, as prices are positive.

    Prices are divided by `factor` first, when given."""
    values = np.asarray(prices, dtype=float)
    return _to_tick_in_place(
        np.asarray(values / tick if factor is None else values / factor),
        tick,
        divided=factor is None,
    )


def _to_tick_in_place(out: np.ndarray, tick: float, divided: bool = False) -> np.ndarray:
    """`out` rounded to the tick in place: floor(out / tick + 0.5 + 1e-9) * tick.

    `out` is already / tick when `divided`. It works step by step in the one array. The float
    operations are the one-line formula's, in the same order. No temporary array per step.
    """
    if not divided:
        out /= tick
    out += 0.5
    out += 1e-9
    np.floor(out, out=out)
    out *= tick
    return out


class Panels(dict[str, pd.DataFrame]):
    """The strategy fields' panels, aligned to the market's sessions and symbols, arrays read once.

    This is what a strategy host is sent, row by row, up to each decision date."""

    def __init__(self, frames: Mapping[str, pd.DataFrame]) -> None:
        super().__init__(frames)
        self.arrays = {name: frame.to_numpy() for name, frame in frames.items()}


@dataclass
class MarketFrames:
    """Aligned (T x N) arrays of one market. Index t is a session, column i a symbol. Prices are
    raw."""

    dates: pd.DatetimeIndex
    symbols: pd.Index
    panels: Panels  # adjusted panels for strategies
    close: np.ndarray  # raw close (NaN when suspended)
    last_close: np.ndarray  # raw close carried forward over suspensions (valuation)
    tradable: np.ndarray
    fill_price: np.ndarray  # raw frictionless fill price
    limit_up: np.ndarray  # raw limit prices (inf / 0 when no limit)
    limit_down: np.ndarray
    at_limit_up: np.ndarray
    at_limit_down: np.ndarray
    adv: np.ndarray  # mean traded value of the `adv_window` sessions before t
    sigma: np.ndarray  # std of daily adjusted returns over the `sigma_window` sessions before t
    action_ratio: np.ndarray  # factor[t] / factor[t-1]: != 1 on an ex-date
    factor_known: np.ndarray  # True where the raw price level comes from a known factor
    lot_minimum: np.ndarray  # (N,) smallest legal order per symbol
    lot_step: np.ndarray  # (N,) increment above it

    @classmethod
    def build(
        cls,
        panels: Mapping[str, pd.DataFrame],
        rules: FrictionRules,
        st_symbols: Iterable[str] = (),
        limit_pct: Mapping[str, float] | None = None,
    ) -> MarketFrames:
        """Align the panels and precompute every per-cell quantity the broker and replay use."""
        if "close" not in panels:
            raise DataValidationError("market panels need a 'close' panel")
        dates, symbols = _axes(panels["close"])
        aligned = {f: _aligned(p, dates, symbols) for f, p in panels.items()}
        adjusted = aligned["close"].to_numpy()
        # The smallest price first (one pass, NaN skipped). Cells are looked at only when it is
        # not positive.
        if np.fmin.reduce(adjusted, axis=None, initial=np.inf) <= 0 and np.any(
            (adjusted <= 0) & np.isfinite(adjusted)
        ):
            raise DataValidationError("close prices must be positive")
        factor, factor_known = _factors(aligned.get("factor"), adjusted.shape)
        adjusted_last = _ffill(adjusted)
        adv_windows = ColumnWindows(len(dates), rules.adv_window)
        sigma_windows = (
            adv_windows
            if rules.sigma_window == rules.adv_window
            else ColumnWindows(len(dates), rules.sigma_window)
        )
        with ThreadPoolExecutor(max_workers=1) as background:
            # pandas' rolling kernels release the GIL: volatility, then ADV, run beside the rest of
            # the build.
            sigma = background.submit(
                rolling_by_column, _returns(adjusted_last), sigma_windows, 2, "std"
            )
            raw = _raw_prices(panels, aligned, factor, rules.tick)
            volume = (
                aligned["volume"].to_numpy()
                if "volume" in aligned
                else np.full(adjusted.shape, np.nan)
            )
            close = raw["close"]
            adv = background.submit(
                rolling_by_column,
                _traded_value(close, volume, aligned.get("amount")),
                adv_windows,
                min(5, rules.adv_window),
                "mean",
            )
            tradable = _tradable(close, volume)
            # Close itself when none is missing: nothing writes to either
            last_close = _ffill(close)
            fill = _fill_prices(raw, aligned, rules.fill_price)
            try:
                minimum, step = rules.lot_rules(list(symbols))
            except ValueError as exc:
                raise DataValidationError(
                    f"cannot tell the lot size or price limit of a symbol under "
                    f"{type(rules).__name__}: {exc}"
                ) from exc
            up, down, at_up, at_down = _limits(
                aligned, adjusted_last, factor, fill, rules, st_symbols, limit_pct, dates, symbols
            )
        strategy_panels = Panels({f: aligned[f] for f in STRATEGY_FIELDS if f in aligned})
        return cls(
            dates,
            symbols,
            strategy_panels,
            close,
            last_close,
            tradable,
            fill,
            up,
            down,
            at_up,
            at_down,
            adv.result(),
            sigma.result(),
            _action_ratio(factor, adjusted.shape),
            factor_known,
            minimum,
            step,
        )

    # Read once per replay, so the loop over events touches arrays and lists, not pandas objects.
    @cached_property
    def mark_price(self) -> np.ndarray:
        """last_close with unknown prices as 0: what a holding is marked at."""
        return cast(np.ndarray, np.nan_to_num(self.last_close, nan=0.0))

    @cached_property
    def has_action(self) -> np.ndarray:
        """(T,) True on sessions where some symbol's factor steps (a corporate action may apply)."""
        return cast(np.ndarray, (self.action_ratio != 1.0).any(axis=1))

    @cached_property
    def days(self) -> list[date]:
        """The session dates as datetime.date."""
        return list(self.dates.date)

    @cached_property
    def day_ns(self) -> np.ndarray:
        """The session dates as int64 nanoseconds since the epoch (what the strategy host's wire
        carries)."""
        return cast(np.ndarray, self.dates.values.astype("datetime64[ns]").astype("<i8"))

    @cached_property
    def stamps(self) -> list[pd.Timestamp]:
        """The session dates as Timestamps (boxed once, not on every `dates[t]`)."""
        return list(self.dates)

    @cached_property
    def positions(self) -> dict[str, int]:
        """Column of each symbol."""
        return {symbol: i for i, symbol in enumerate(self.symbols)}

    @cached_property
    def symbol_array(self) -> np.ndarray:
        """The symbols as an object array."""
        return np.asarray(self.symbols, dtype=object)

    @cached_property
    def no_action_rows(self) -> dict[str, np.ndarray]:
        """The (empty) corporate-action rows of a session where no factor steps."""
        none = np.zeros(len(self.symbols), dtype=np.int64)
        return Actions(none, none, np.ones(len(self.symbols))).rows(
            self.dates[0], self.symbols, none
        )

    @cached_property
    def symbol_names(self) -> np.ndarray:
        """The symbols as an object array of str (the symbol column of fills and orders)."""
        return np.asarray(self.symbols.astype(str), dtype=object)

    def index_of(self, day: pd.Timestamp) -> int:
        """Row of a session date; KeyError when the market has no row for it."""
        stamp = pd.Timestamp(day).normalize()
        position = self.dates.searchsorted(stamp)
        if position >= len(self.dates) or self.dates[position] != stamp:
            raise KeyError(f"no market data on {stamp.date()}")
        return int(position)


def _traded_value(close: np.ndarray, volume: np.ndarray, amount: pd.DataFrame | None) -> np.ndarray:
    """Traded value per cell: the amount, else close x volume.

    Column-major: the layout rolling_by_column lays end to end, so it needs no copy."""
    traded = np.multiply(close, volume, out=np.empty(close.shape, order="F"))
    if amount is not None:
        given = amount.to_numpy()
        np.copyto(traded, given, where=~np.isnan(given))  # amount.fillna(close * volume)
    return cast(np.ndarray, traded)


def _tradable(close: np.ndarray, volume: np.ndarray) -> np.ndarray:
    """A known close and no zero (or negative) volume: isfinite(close) & ~(isfinite(volume) &
    (volume <= 0))."""
    halted = volume <= 0
    halted &= np.isfinite(volume)
    np.logical_not(halted, out=halted)
    halted &= np.isfinite(close)
    return halted


def _fill_prices(
    raw: Mapping[str, np.ndarray], aligned: Mapping[str, pd.DataFrame], policy: FillPrice
) -> np.ndarray:
    """Frictionless raw fill price per cell under the configured policy."""
    close = raw["close"]
    if policy is FillPrice.CLOSE:
        return close
    if policy is FillPrice.OPEN:
        opened = raw.get("open", close)
        return np.where(np.isfinite(opened), opened, close)
    high, low = _or_close(raw.get("high", close), close), _or_close(raw.get("low", close), close)
    typical = np.add(high, low)
    typical += close
    typical /= 3.0  # (high + low + close) / 3.0
    if "amount" in aligned and "volume" in aligned:
        volume = aligned["volume"].to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            vwap = aligned["amount"].to_numpy() / np.where(volume > 0, volume, np.nan)
        # amount/volume is a raw VWAP; trust it only inside the day's raw range.
        inside = (vwap >= low * 0.999) & (vwap <= high * 1.001)
        np.copyto(typical, vwap, where=inside)
    return cast(np.ndarray, typical)


def _or_close(prices: np.ndarray, close: np.ndarray) -> np.ndarray:
    """`prices` with close where they are not finite.

    No copy when all are finite, or when they are the close."""
    if prices is close or np.isfinite(prices).all():
        return prices
    return np.where(np.isfinite(prices), prices, close)


def _limits(
    aligned: Mapping[str, pd.DataFrame],
    adjusted_last: np.ndarray,
    factor: np.ndarray | None,
    fill: np.ndarray,
    rules: FrictionRules,
    st_symbols: Iterable[str],
    override: Mapping[str, float] | None,
    dates: pd.DatetimeIndex,
    symbols: pd.Index,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Raw limit prices from the exchange's reference price, and whether the fill sits at a
    limit."""
    shape = fill.shape
    if not rules.price_limits:
        no = _constant(False, shape)
        return _constant(np.inf, shape), _constant(0.0, shape), no, no
    reference = _shifted(adjusted_last)  # the adjusted previous close, unless the raw one is given
    if "prev_close_raw" in aligned:
        given = aligned["prev_close_raw"].to_numpy()
        np.copyto(reference, given, where=np.isfinite(given) & (given > 0))
    # The exchange's reference on an ex-date is the ex-rights price: the adjusted previous close /
    # today's factor.
    if factor is not None:
        reference /= factor
    _to_tick_in_place(reference, 0.01)
    known = np.isfinite(reference)
    reference *= 100
    np.rint(reference, out=reference)
    reference[~known] = 0
    fraction = _fractions(aligned, rules, st_symbols, override, dates, symbols)
    # An unknown reference keeps its fraction here (NaN before): `limited` masks those cells below.
    down_fen, up_fen = limits.limit_prices_fen(_to_int64_in_place(reference), fraction)
    del reference
    limited = known & np.isfinite(fraction)
    fill_fen = np.multiply(fill, 100)
    np.rint(fill_fen, out=fill_fen)
    np.copyto(fill_fen, -100.0, where=np.isnan(fill))  # a missing fill counts as -1 yuan
    at_up, at_down = limited & (fill_fen >= up_fen), limited & (fill_fen <= down_fen)
    del fill_fen
    unlimited = ~limited
    return (
        _yuan_in_place(up_fen, unlimited, np.inf),
        _yuan_in_place(down_fen, unlimited, 0.0),
        at_up,
        at_down,
    )


def _constant(value: float | bool, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array of one value (float, or bool) without the memory of one.

    Nothing writes to the frames."""
    return np.broadcast_to(np.array(value, dtype=bool if isinstance(value, bool) else float), shape)


def _to_int64_in_place(values: np.ndarray) -> np.ndarray:
    """values.astype(np.int64) in the values' own buffer (both types are 8 bytes wide); `values` is
    spent."""
    out = values.view(np.int64)
    np.copyto(out, values, casting="unsafe")
    return out


def _yuan_in_place(fen: np.ndarray, unlimited: np.ndarray, no_limit: float) -> np.ndarray:
    """fen / 100.0 in fen's own buffer, `no_limit` where there is none; `fen` is spent."""
    out = fen.view(np.float64)
    np.divide(fen, 100.0, out=out)
    np.copyto(out, no_limit, where=unlimited)
    return out


def _fractions(
    aligned: Mapping[str, pd.DataFrame],
    rules: FrictionRules,
    st_symbols: Iterable[str],
    override: Mapping[str, float] | None,
    dates: pd.DatetimeIndex,
    symbols: pd.Index,
) -> np.ndarray:
    """Limit fractions, (T x N), or (1 x N) when `override` gives every column's.

    The rules' fractions, overridden per symbol."""
    columns = (
        [i for i, symbol in enumerate(symbols) if symbol in override]
        if override is not None
        else []
    )
    values = [float(override[symbols[i]]) for i in columns] if override is not None else []
    # Every rule-set fraction would be overwritten: skip computing them
    if len(columns) == len(symbols):
        return np.array(values, dtype=float).reshape(1, len(symbols))
    shape = (len(dates), len(symbols))
    st = (
        np.nan_to_num(aligned["st"].to_numpy(), nan=0.0) > 0
        if "st" in aligned
        else np.zeros(shape, bool)
    )
    st |= np.isin(np.asarray(symbols, dtype=object), list(st_symbols))[None, :]
    list_dates = (
        from_yyyymmdd(aligned["list_date"].to_numpy())
        if "list_date" in aligned
        else np.full(shape, np.datetime64("NaT"), dtype="datetime64[ns]")
    )
    grid = np.broadcast_to(dates.values[:, None], shape)
    listing = (
        calendar.session_numbers(grid, list_dates)
        if isinstance(rules, AShareRules)
        else np.full(shape, np.nan)
    )
    fraction = rules.limit_fractions(list(symbols), dates.values, st, listing, list_dates)
    fraction[:, columns] = values
    return fraction


def _aligned(panel: pd.DataFrame, dates: pd.DatetimeIndex, symbols: pd.Index) -> pd.DataFrame:
    """`panel` on the sessions and symbols of the close panel, as float.

    A float panel that has them already keeps its data (reindex would copy it). Build only reads
    the panels. A frame with the same data and the very axes reindex gives is the frame it returns.
    """
    if panel.index.equals(dates) and panel.columns.equals(symbols):
        values = panel.to_numpy()
        if values.dtype == np.float64:
            return pd.DataFrame(values, index=dates, columns=symbols, copy=False)
    return panel.reindex(index=dates, columns=symbols).astype(float, copy=False)


def _raw_prices(
    panels: Mapping[str, pd.DataFrame],
    aligned: Mapping[str, pd.DataFrame],
    factor: np.ndarray | None,
    tick: float,
) -> dict[str, np.ndarray]:
    """Raw open, high, low and close on the tick.

    Fields given as one and the same panel are converted once."""
    raw: dict[str, np.ndarray] = {}
    for field in ("open", "high", "low", "close"):
        if field in aligned:
            same = next((f for f in raw if panels[f] is panels[field]), None)
            raw[field] = (
                raw[same] if same is not None else to_tick(aligned[field].to_numpy(), tick, factor)
            )
    return raw


def _axes(close: pd.DataFrame) -> tuple[pd.DatetimeIndex, pd.Index]:
    """Sorted session dates and the symbols of the close panel.

    A copy is sorted only when out of order."""
    if not close.index.is_monotonic_increasing:
        close = close.sort_index()
    return pd.DatetimeIndex(close.index), close.columns


def _factors(
    factor_df: pd.DataFrame | None, shape: tuple[int, ...]
) -> tuple[np.ndarray | None, np.ndarray]:
    """Adjustment factor per cell, and where the factor is known.

    Each unknown one is the nearest known of its symbol, else 1. None: no factor panel, raw =
    adjusted."""
    if factor_df is None:
        return None, _constant(False, shape)
    values = factor_df.to_numpy()
    known = np.isfinite(values)
    if np.any(values[known] <= 0):
        raise DataValidationError("adjustment factors must be positive")
    if known.all():
        return values, known
    return factor_df.bfill().ffill().fillna(1.0).to_numpy(), known


def _ffill(values: np.ndarray) -> np.ndarray:
    """Each column's last known value carried forward over NaN (pandas' ffill).

    `values` itself when none is NaN."""
    if np.isnan(values).any():
        return cast(np.ndarray, pd.DataFrame(values).ffill().to_numpy())
    return values


def _shifted(values: np.ndarray) -> np.ndarray:
    """Each row replaced by the one before (NaN on the first): DataFrame.shift(1)."""
    out = np.empty_like(values)
    out[:1] = np.nan
    out[1:] = values[:-1]
    return out


def _returns(prices: np.ndarray) -> np.ndarray:
    """prices[t] / prices[t-1] - 1, NaN on the first row: pct_change(fill_method=None);
    column-major."""
    out = np.empty(prices.shape, order="F")
    out[:1] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(prices[1:], prices[:-1], out=out[1:])
    out[1:] -= 1
    return out


def _action_ratio(factor: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """factor[t] / factor[t-1], set to exactly 1 where the step is float noise; all 1 without a
    factor."""
    if factor is None:
        return _constant(1.0, shape)
    ratio = np.ones(shape)
    ratio[1:] = factor[1:] / factor[:-1]
    ratio[np.abs(ratio - 1.0) < NO_ACTION] = 1.0
    return ratio


class ColumnWindows(BaseIndexer):
    """The `window_size` rows before each row (not the row itself) of a (T x N) panel.

    The panel is flattened column by column (column-major). A window never reaches into the column
    before. A column's first row has an empty one."""

    def __init__(self, rows: int, window_size: int) -> None:
        super().__init__(window_size=window_size)
        self.rows = rows
        self._bounds: dict[
            int, tuple[np.ndarray, np.ndarray]
        ] = {}  # kept: ADV and sigma often share them

    def get_window_bounds(
        self,
        num_values: int = 0,
        min_periods: int | None = None,
        center: bool | None = None,
        closed: str | None = None,
        step: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """[start, end) of the window of each flat position (`num_values` is a multiple of
        `rows`)."""
        if num_values not in self._bounds:
            end = np.arange(num_values, dtype=np.int64)
            start = end - self.window_size
            # The first windows of a column start at its top, not in the column before
            if self.rows:
                heads = start.reshape(-1, self.rows)[:, : self.window_size + 1]
                np.maximum(
                    heads, np.arange(0, num_values, self.rows, dtype=np.int64)[:, None], out=heads
                )
            self._bounds = {num_values: (start, end)}
        return self._bounds[num_values]


def rolling_by_column(
    values: np.ndarray, windows: ColumnWindows, min_periods: int, statistic: Literal["mean", "std"]
) -> np.ndarray:
    """DataFrame(values).rolling(window, min_periods).<statistic>().shift(1), bit for bit.

    It takes one pandas call. pandas runs its rolling kernels column by column, with a Python round
    trip per column. Here the columns are laid end to end in one Series. `windows` keeps each window
    inside its column. The kernels restart their running sums whenever a window starts at or after
    the previous window's end. That happens at each column's first two rows. So every column gets
    the same arithmetic as on its own. The windows end one row early, which is the shift. A
    column's first row has an empty window (NaN). The result is column-major, as pandas' own.
    """
    rows, columns = values.shape
    rolling = pd.Series(np.ravel(values, order="F")).rolling(windows, min_periods=min_periods)
    return cast(
        np.ndarray,
        (rolling.mean() if statistic == "mean" else rolling.std())
        .to_numpy()
        .reshape(columns, rows)
        .T,
    )
