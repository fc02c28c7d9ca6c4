"""The bundled real-data sample (data/sample): offline, the default source."""

from __future__ import annotations

from datetime import date
from functools import cached_property
from pathlib import Path

import pandas as pd

from oomrl.data.schema import (
    conform_bars,
    conform_index,
    conform_membership,
    empty_bars,
    with_prev_close,
)
from oomrl.errors import DataValidationError

SAMPLE_DIR = Path(__file__).resolve().parents[3] / "data" / "sample"
"""Where the repository keeps the snapshot (scripts/build_sample.py writes it; PROVENANCE.md
describes it)."""


def _read(path: Path, reader: str) -> pd.DataFrame:
    """Read one sample file; a missing or corrupt file fails with its path named."""
    try:
        if reader == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype={"symbol": str, "name": str})
    except FileNotFoundError:
        raise DataValidationError(
            f"sample file {path} is missing (rebuild with scripts/build_sample.py)"
        ) from None
    except Exception as exc:  # pyarrow/pandas raise many types for a corrupt file
        raise DataValidationError(f"cannot read sample file {path}: {exc}") from exc


class SampleSource:
    """Bars, CSI 300 levels and PIT membership from the bundled parquet/CSV files."""

    name = "sample"
    live = False

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root else SAMPLE_DIR

    @cached_property
    def _bars(self) -> dict[str, pd.DataFrame]:
        # The file leaves prev_close_raw to the previous bar's close (same basis): derived here.
        frame = with_prev_close(conform_bars(_read(self.root / "bars.parquet", "parquet")))
        return {
            str(sym): part.reset_index(drop=True)
            for sym, part in frame.groupby("symbol", sort=True)
        }

    @cached_property
    def _index(self) -> pd.DataFrame:
        return conform_index(_read(self.root / "index.parquet", "parquet"))

    def coverage(self) -> tuple[date, date]:
        """From the first index level (2005) to the last bar: the whole bundle."""
        first = min(
            self._index["date"].min(), *(part["date"].iloc[0] for part in self._bars.values())
        )
        last = max(
            self._index["date"].max(), *(part["date"].iloc[-1] for part in self._bars.values())
        )
        return first.date(), last.date()

    def symbols(self) -> list[str]:
        """Every symbol the sample has bars for."""
        return list(self._bars)

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        part = self._bars.get(symbol)
        if part is None:
            return empty_bars()
        mask = (part["date"] >= pd.Timestamp(start)) & (part["date"] <= pd.Timestamp(end))
        return part.loc[mask].reset_index(drop=True)

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        levels = self._index
        mask = (
            (levels["code"] == code)
            & (levels["kind"] == kind)
            & (levels["date"] >= pd.Timestamp(start))
            & (levels["date"] <= pd.Timestamp(end))
        )
        return levels.loc[mask].reset_index(drop=True)

    def membership(self) -> pd.DataFrame:
        return conform_membership(_read(self.root / "membership.csv", "csv"))
