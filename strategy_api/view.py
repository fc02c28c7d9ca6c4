"""MarketView, the only market a strategy sees, and History, the append-only rows it is cut from.

A view holds the sessions up to its decision date and nothing after: the strategy host appends rows
to a History as the decision dates advance, so a later row does not exist in the host when a
decision is asked for; a view built from whole panels copies the rows up to `as_of` and keeps no
reference to the panels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import date

import numpy as np
import pandas as pd

FIELDS = ("open", "high", "low", "close", "volume", "amount")
DAY_NS = 86_400_000_000_000


def midnight(day: date | pd.Timestamp | np.datetime64 | str) -> pd.Timestamp:
    """A naive midnight Timestamp of `day` (without the normalize call when it already is one)."""
    stamp = pd.Timestamp(day)
    if stamp.tz is None and stamp.unit == "ns" and stamp.value % DAY_NS == 0:
        return stamp
    return stamp.normalize()


class Holdings(Mapping[str, float]):
    """The book a decision starts from: weight of the NAV per held symbol, read-only, read on first
    use.

    A strategy host may still be receiving the book when the strategy starts to decide (the engine
    sends it after the question, while the host works); every caller gives S this same type, filled
    on first read, so nothing S can see tells one caller from another.
    """

    __slots__ = ("_weights",)
    _weights: Callable[[], dict[str, float]]

    def __init__(
        self, source: Mapping[str, float] | Callable[[], Mapping[str, float]] | None = None
    ) -> None:
        fixed = dict(source or {}) if not callable(source) else {}
        fetch: Callable[[], Mapping[str, float]] = source if callable(source) else (lambda: fixed)
        kept: list[dict[str, float]] = []  # the weights once fetched (held in the closure alone)

        def weights() -> dict[str, float]:
            if not kept:
                kept.append({str(k): float(v) for k, v in fetch().items()})
            return kept[0]

        object.__setattr__(self, "_weights", weights)

    def __getitem__(self, symbol: str) -> float:
        return self._weights()[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights())

    def __len__(self) -> int:
        return len(self._weights())

    def __repr__(self) -> str:
        return f"Holdings({self._weights()!r})"

    def copy(self) -> dict[str, float]:
        """A plain dict of the weights (what `dict.copy` gave when holdings were a dict)."""
        return dict(self._weights())


class History:
    """Sessions (rows) of every field for fixed symbols, appended in date order, never rewritten."""

    def __init__(self, symbols: Iterable[str], fields: Iterable[str], capacity: int = 256) -> None:
        self.symbols = pd.Index([str(s) for s in symbols], dtype=object)
        if self.symbols.has_duplicates:
            raise ValueError("symbols must be unique")
        self.fields = tuple(fields)
        unknown = set(self.fields) - set(FIELDS)
        if "close" not in self.fields:
            raise ValueError("a market needs at least a 'close' field")
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}; allowed: {FIELDS}")
        self.rows = 0
        self._days = np.empty(max(capacity, 1), dtype="datetime64[ns]")
        self._data = {
            f: np.full((max(capacity, 1), len(self.symbols)), np.nan) for f in self.fields
        }
        self.names = np.asarray(self.symbols, dtype=object)
        self.positions = {symbol: i for i, symbol in enumerate(self.symbols)}

    @classmethod
    def over(
        cls,
        symbols: Iterable[str],
        fields: Iterable[str],
        days: np.ndarray,
        data: Mapping[str, np.ndarray],
    ) -> History:
        """A History whose rows live in memory another process fills (read-only here), row count 0.

        The owner writes a session's row before it tells this side to `extend` over it; a row not
        yet written is zeros.
        """
        history = cls(symbols, fields, capacity=1)
        if (
            days.dtype != np.dtype("datetime64[ns]")
            or days.ndim != 1
            or set(data) != set(history.fields)
            or any(
                a.shape != (len(days), len(history.symbols)) or a.dtype != np.float64
                for a in data.values()
            )
        ):
            raise ValueError(
                "shared rows must be datetime64[ns] days and one float64 (days x symbols) "
                "array a field"
            )
        history._days, history._data, history.shared = days, dict(data), True
        return history

    shared = False

    def extend(self, rows: int) -> None:
        """Take the shared rows up to `rows` (more than before, in increasing date order)."""
        if not self.shared or not self.rows <= rows <= len(self._days):
            raise ValueError(f"cannot extend {self.rows} shared rows to {rows}")
        days = self._days[max(self.rows - 1, 0) : rows]
        if len(days) > 1 and (days[1:] <= days[:-1]).any():
            raise ValueError("shared sessions must be in strictly increasing date order")
        self.rows = rows

    def append(self, days: np.ndarray, values: Mapping[str, np.ndarray]) -> None:
        """Add sessions after the last one: `days` (datetime64) and a (rows x symbols) array per
        field."""
        if self.shared:
            raise ValueError("rows of a shared History are written by its owner: extend it instead")
        days = np.asarray(days, dtype="datetime64[ns]")
        count = len(days)
        if len(values) != len(self.fields) or not all(f in values for f in self.fields):
            raise ValueError(
                f"rows must give exactly the fields {self.fields}, got {sorted(values)}"
            )
        if count and (
            (count > 1 and (days[1:] <= days[:-1]).any())
            or (self.rows and days[0] <= self._days[self.rows - 1])
        ):
            raise ValueError("sessions must be appended in strictly increasing date order")
        shape = (count, len(self.symbols))
        for field, array in values.items():
            if np.shape(array) != shape:
                raise ValueError(
                    f"field {field!r} has shape {np.shape(array)}, expected "
                    f"({count}, {len(self.symbols)})"
                )
        self._reserve(self.rows + count)
        self._days[self.rows : self.rows + count] = days
        for field, array in values.items():
            self._data[field][self.rows : self.rows + count] = np.asarray(array, dtype=float)
        self.rows += count

    def _reserve(self, rows: int) -> None:
        if rows <= len(self._days):
            return
        size = max(rows, 2 * len(self._days))
        grown = np.empty(size, dtype="datetime64[ns]")
        grown[: self.rows] = self._days[: self.rows]
        self._days = grown
        for field, old in self._data.items():
            new = np.full((size, len(self.symbols)), np.nan)
            new[: self.rows] = old[: self.rows]
            self._data[field] = new

    def view(
        self,
        portfolio_value: float | Callable[[], float] = 1.0,
        members: Iterable[str] | np.ndarray | None = None,
        as_of: date | pd.Timestamp | None = None,
    ) -> MarketView:
        """The view over every appended session, decided on `as_of` (default: the last session).

        `as_of` may be a later day than the last session (a weekend: the view then has no universe),
        never an earlier one: a History holds no row after its decision date.
        """
        if not self.rows and as_of is None:
            raise ValueError("no session appended yet: there is no decision date")
        last = pd.Timestamp(self._days[self.rows - 1]) if self.rows else None
        stamp = (
            last if as_of is None else as_of if isinstance(as_of, pd.Timestamp) else midnight(as_of)
        )
        assert stamp is not None  # as_of, or the last session (there is one: checked above)
        if last is not None and stamp < last:
            raise ValueError(
                f"the decision date {stamp.date()} is before the last session "
                f"{last.date()}: a view never holds a later row"
            )
        return MarketView._of(self, self.rows, stamp, portfolio_value, members)


def _value_on_first_use(value: float | Callable[[], float]) -> Callable[[], float]:
    """A function giving `value` as a float (a callable's answer, fetched once)."""
    if not callable(value):
        fixed = float(value)
        return lambda: fixed
    fetch = value
    kept: list[float] = []

    def read() -> float:
        if not kept:
            kept.append(float(fetch()))
        return kept[0]

    return read


def _read_only(array: np.ndarray) -> np.ndarray:
    """`array` (a fresh slice, so the History's own array is untouched) made read-only."""
    if array.flags.writeable:  # a slice of shared memory mapped read-only is already
        array.flags.writeable = False
    return array


class MarketView:
    """Daily panels (date x symbol) up to the decision date `as_of`; nothing later is held."""

    def __init__(
        self,
        panels: Mapping[str, pd.DataFrame],
        as_of: date | pd.Timestamp,
        portfolio_value: float | Callable[[], float] = 1.0,
        members: Iterable[str] | None = None,
    ) -> None:
        if "close" not in panels:
            raise ValueError("a MarketView needs at least a 'close' panel")
        unknown = set(panels) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown panel fields {sorted(unknown)}; allowed: {FIELDS}")
        stamp = midnight(as_of)
        close = panels["close"]
        index = pd.DatetimeIndex(close.index)
        visible = int(index.searchsorted(stamp, side="right"))
        history = History(close.columns, list(panels), capacity=visible)
        # Only the rows up to as_of are copied in: the panels themselves are not kept.
        history.append(
            index.values[:visible],
            {
                f: p.reindex(index=index[:visible], columns=close.columns).to_numpy(dtype=float)
                for f, p in panels.items()
            },
        )
        self._init(history, visible, stamp, portfolio_value, members)

    @classmethod
    def _of(
        cls,
        history: History,
        rows: int,
        as_of: pd.Timestamp,
        portfolio_value: float | Callable[[], float],
        members: Iterable[str] | np.ndarray | None,
    ) -> MarketView:
        view = cls.__new__(cls)
        view._init(history, rows, as_of, portfolio_value, members)
        return view

    def _init(
        self,
        history: History,
        rows: int,
        as_of: pd.Timestamp,
        portfolio_value: float | Callable[[], float],
        members: Iterable[str] | np.ndarray | None,
    ) -> None:
        self._as_of = as_of
        self._symbols = history.symbols
        self._names = history.names
        self._days = _read_only(history._days[:rows])
        self._arrays = {f: _read_only(a[:rows]) for f, a in history._data.items()}
        # Read on first use, like Holdings: the engine's book may arrive after the question.
        self._portfolio_value = _value_on_first_use(portfolio_value)
        # Index members on the decision date (point in time), as a mask over the symbols; None means
        # every symbol with data. Positions (an int array) come from a host, names from anyone.
        self._members: np.ndarray | None = None
        if members is not None:
            mask = np.zeros(len(history.symbols), dtype=bool)
            if isinstance(members, np.ndarray) and members.dtype.kind == "i":
                mask[members[(members >= 0) & (members < len(mask))]] = True
            else:
                known = history.positions
                mask[[known[m] for m in map(str, members) if m in known]] = True
            self._members = mask

    @property
    def portfolio_value(self) -> float:
        """The account's NAV (CNY) at the decision date's close."""
        return self._portfolio_value()

    @property
    def as_of(self) -> pd.Timestamp:
        """The decision date: the last date whose data the strategy may use."""
        return self._as_of

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the available panels."""
        return tuple(self._arrays)

    @property
    def symbols(self) -> pd.Index:
        """The symbols (columns) of the panels, in the order of `values`' columns."""
        return self._symbols

    @property
    def dates(self) -> pd.DatetimeIndex:
        """The sessions of the panels (rows), the last on or before as_of."""
        return pd.DatetimeIndex(self._days)

    def _array(self, field: str) -> np.ndarray:
        if field not in self._arrays:
            raise KeyError(f"no {field!r} panel in this view; available: {self.fields}")
        return self._arrays[field]

    def values(self, field: str) -> np.ndarray:
        """One field's rows up to as_of as a read-only float array (rows: sessions, columns:
        `symbols`)."""
        return self._array(field)

    def panel(self, field: str) -> pd.DataFrame:
        """A copy of one field's whole panel up to as_of."""
        return pd.DataFrame(self._array(field).copy(), index=self.dates, columns=self._symbols)

    def history(self, field: str, rows: int) -> pd.DataFrame:
        """A copy of the last `rows` rows (sessions) of one field, ending at the decision date."""
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        array = self._array(field)
        start = max(len(array) - rows, 0)
        return pd.DataFrame(
            array[start:].copy(), index=pd.DatetimeIndex(self._days[start:]), columns=self._symbols
        )

    def universe(self) -> list[str]:
        """Index members (when known) with a close on the decision date (traded that day)."""
        close = self._arrays["close"]
        if not len(close) or self._days[-1] != self._as_of.to_datetime64():
            return []
        traded = ~np.isnan(close[-1])
        if self._members is not None:
            traded &= self._members
        return sorted(self._names[traded].tolist())

    def traded_value(self, window: int) -> pd.Series:
        """Average daily traded value (CNY) over the last `window` sessions: amount, else close x
        volume."""
        close = self.history("close", window)
        if "volume" not in self._arrays:
            raise KeyError("traded_value needs a 'volume' panel")
        value = close * self.history("volume", window)
        if "amount" in self._arrays:
            value = self.history("amount", window).fillna(value)
        return value.mean(axis=0, skipna=True)
