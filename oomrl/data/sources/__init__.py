"""Market-data sources behind one protocol, and the registry that turns `--source` specs into
them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from guardrails.lazy import front_door
from oomrl.errors import OomrlError

if TYPE_CHECKING:
    import pandas as pd

    from oomrl.data.sources.akshare import AkshareSource
    from oomrl.data.sources.csv import CsvSource, read_csv_file
    from oomrl.data.sources.sample import SampleSource
    from oomrl.data.sources.synthetic import SyntheticSource, synthetic_symbols
    from oomrl.data.sources.yfinance import YFinanceSource, yahoo_ticker


@runtime_checkable
class MarketSource(Protocol):
    """What every source offers. Frames come back in the schema of oomrl.data.schema, volume in
    shares.

    `live` sources reach the network and raise SourceUnavailableError when they cannot.
    """

    name: str
    live: bool

    def coverage(self) -> tuple[date, date] | None:
        """The date range the source holds (offline sources), or None when open-ended (live)."""

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        """Daily bars of one symbol in [start, end] (BAR_COLUMNS)."""

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        """Index closes (INDEX_COLUMNS); kind "price" or "total_return"."""

    def membership(self) -> pd.DataFrame:
        """CSI 300 membership snapshots (MEMBERSHIP_COLUMNS); empty when the source has none."""


SourceFactory = Callable[[str | None], MarketSource]


def _sample(arg: str | None) -> MarketSource:
    from oomrl.data.sources.sample import SampleSource

    return SampleSource(Path(arg) if arg else None)


def _akshare(arg: str | None) -> MarketSource:
    from oomrl.data.sources.akshare import AkshareSource

    return AkshareSource(adjust=arg or "qfq")


def _yfinance(arg: str | None) -> MarketSource:
    from oomrl.data.sources.yfinance import YFinanceSource

    return YFinanceSource()


def _csv(arg: str | None) -> MarketSource:
    from oomrl.data.sources.csv import CsvSource

    if not arg:
        raise OomrlError("the csv source needs a folder: --source csv:DIR")
    return CsvSource(Path(arg))


def _synthetic(arg: str | None) -> MarketSource:
    from oomrl.data.sources.synthetic import SyntheticSource

    if arg and not (arg.strip().isascii() and arg.strip().isdigit()):
        raise OomrlError(
            f"the synthetic source takes a number of symbols: --source synthetic:N, not {arg!r}"
        )
    try:
        return SyntheticSource(symbols=int(arg) if arg else 300)
    except ValueError as exc:  # out of bounds: refused before a single series is drawn
        raise OomrlError(f"--source synthetic:{arg}: {exc}") from None


SOURCES: dict[str, SourceFactory] = {
    "sample": _sample,
    "akshare": _akshare,
    "yfinance": _yfinance,
    "csv": _csv,
    "synthetic": _synthetic,
}
"""Source factories by name; a new source registers here (see docs/data.md)."""


def get_source(spec: str) -> MarketSource:
    """A source from a spec `NAME` or `NAME:ARG` (e.g. `sample`, `csv:/path/to/dir`, `akshare:hfq`,
    `synthetic:500`)."""
    name, _, arg = spec.partition(":")
    factory = SOURCES.get(name.strip().lower())
    if factory is None:
        raise OomrlError(
            f"unknown data source {name!r}; choose one of {', '.join(sorted(SOURCES))}"
        )
    return factory(arg or None)


__all__ = [
    "SOURCES",
    "AkshareSource",
    "CsvSource",
    "MarketSource",
    "SampleSource",
    "SyntheticSource",
    "YFinanceSource",
    "get_source",
    "read_csv_file",
    "synthetic_symbols",
    "yahoo_ticker",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)
