"""A folder of per-symbol CSV files (csv:DIR), with column mapping and units in DIR/source.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from oomrl.data.schema import (
    ADJUSTMENTS,
    SHARES_PER_LOT,
    conform_bars,
    conform_index,
    conform_membership,
    empty_bars,
    empty_index,
    parse_dates,
    with_prev_close,
)
from oomrl.errors import DataValidationError
from oomrl.market.boards import symbol_or_text, to_symbol

DEFAULT_ALIASES: dict[str, tuple[str, ...]] = {
    "date": ("date", "Date", "日期", "trade_date"),
    "open": ("open", "Open", "开盘"),
    "high": ("high", "High", "最高"),
    "low": ("low", "Low", "最低"),
    "close": ("close", "Close", "收盘"),
    "volume": ("volume", "Volume", "vol", "成交量"),
    "amount": ("amount", "Amount", "成交额"),
    "prev_close_raw": ("prev_close_raw", "pre_close", "preclose"),
}
"""Column names recognised without a mapping (English, Yahoo, akshare Chinese, Tushare)."""
INDEX_FILES = {"price": "000300.csv", "total_return": "H00300.csv"}


@dataclass
class CsvLayout:
    """DIR/source.toml: `volume_unit` ("shares" | "lots"), `adjustment`, and `[columns]` schema_name
    = "csv name"."""

    volume_unit: str = "shares"
    adjustment: str = "none"
    columns: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> CsvLayout:
        path = folder / "source.toml"
        if not path.exists():
            return cls()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise DataValidationError(f"cannot read {path}: {exc}") from exc
        unknown = sorted(set(data) - {"volume_unit", "adjustment", "columns"})
        if unknown:
            raise DataValidationError(
                f"{path}: unknown key(s) {', '.join(unknown)}; known: volume_unit, "
                "adjustment, [columns]"
            )
        layout = cls(
            volume_unit=data.get("volume_unit", "shares"),
            adjustment=data.get("adjustment", "none"),
            columns=_columns(path, data.get("columns", {})),
        )
        if layout.volume_unit not in ("shares", "lots") or layout.adjustment not in ADJUSTMENTS:
            raise DataValidationError(
                f"{path}: volume_unit must be shares|lots and adjustment none|qfq|hfq "
                f"(got {layout.volume_unit!r}, {layout.adjustment!r})"
            )
        return layout


def _columns(path: Path, given: object) -> dict[str, str]:
    """`[columns]` as schema name -> CSV column name, both text.

    The names are ones the source reads."""
    if not isinstance(given, dict):
        raise DataValidationError(
            f"{path}: columns must be a table `[columns]` of schema_name = \"csv column\" "
            f"(got {type(given).__name__} {str(given)[:60]})"
        )
    wrong = sorted(
        str(name)
        for name, column in given.items()
        if name not in DEFAULT_ALIASES or not isinstance(column, str) or not column
    )
    if wrong:
        raise DataValidationError(
            f"{path}: [columns] {', '.join(wrong)}: each key must be one of "
            f"{', '.join(DEFAULT_ALIASES)} and each value the name of a CSV column (text)"
        )
    return dict(given)


def read_csv_file(path: Path) -> pd.DataFrame:
    """Read one CSV (UTF-8 with or without BOM). An unreadable file fails with its path and the
    problem."""
    try:
        return pd.read_csv(path, encoding="utf-8-sig", dtype=str)
    except FileNotFoundError:
        raise DataValidationError(f"{path}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        raise DataValidationError(f"{path}: unreadable CSV ({type(exc).__name__}: {exc})") from exc


class CsvSource:
    """The folder's layout.

    DIR/<code>.csv per symbol; the file stem may be in any spelling: 600519, sh600519, 600519.SH.
    DIR/index/000300.csv (and optional H00300.csv total return) with date,close. Optional
    DIR/membership.csv."""

    name = "csv"
    live = False

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise DataValidationError(f"csv source folder {self.folder} does not exist")
        self.layout = CsvLayout.load(self.folder)

    @cached_property
    def _files(self) -> dict[str, Path]:
        files: dict[str, Path] = {}
        for path in sorted(self.folder.glob("*.csv")):
            if path.name == "membership.csv":
                continue
            try:
                files[to_symbol(path.stem)] = path
            except ValueError:
                raise DataValidationError(
                    f"{path}: file name is not a stock code (expected e.g. 600519.csv)"
                ) from None
        return files

    def symbols(self) -> list[str]:
        return sorted(self._files)

    def _column(
        self, frame: pd.DataFrame, name: str, path: Path, required: bool = True
    ) -> pd.Series | None:
        mapped = self.layout.columns.get(name)
        wanted = ((mapped,) if mapped else ()) + DEFAULT_ALIASES[name]
        for alias in wanted:
            if alias in frame.columns:
                return frame[alias]
        if required:
            raise DataValidationError(
                f"{path}: no column for {name!r} (looked for {', '.join(wanted)}); "
                f"map it in {self.folder / 'source.toml'} under [columns]"
            )
        return None

    def coverage(self) -> tuple[date, date] | None:
        dates = [
            parse_dates(self._column(read_csv_file(p), "date", p)) for p in self._files.values()
        ]
        stamps = pd.concat(dates).dropna() if dates else pd.Series(dtype="datetime64[ns]")
        return (stamps.min().date(), stamps.max().date()) if len(stamps) else None

    def bars(self, symbol: str, start: date, end: date) -> pd.DataFrame:
        path = self._files.get(to_symbol(symbol))
        if path is None:
            return empty_bars()
        raw = read_csv_file(path)

        def get(name: str, required: bool = True) -> pd.Series | None:
            return self._column(raw, name, path, required)

        volume = pd.to_numeric(get("volume"), errors="coerce")
        amount, prev = get("amount", False), get("prev_close_raw", False)
        frame = pd.DataFrame(
            {
                "date": get("date"),
                "symbol": to_symbol(symbol),
                "open": get("open"),
                "high": get("high"),
                "low": get("low"),
                "close": get("close"),
                "volume": volume * (SHARES_PER_LOT if self.layout.volume_unit == "lots" else 1),
                "amount": amount if amount is not None else np.nan,
                "adjustment": self.layout.adjustment,
                "prev_close_raw": prev if prev is not None else np.nan,
            }
        )
        bars = with_prev_close(conform_bars(frame))
        inside = (bars["date"] >= pd.Timestamp(start)) & (bars["date"] <= pd.Timestamp(end))
        # Unparseable dates stay in. So validation quarantines them with a reason instead of losing
        # them.
        return bars.loc[inside | bars["date"].isna()].reset_index(drop=True)

    def index_levels(self, code: str, kind: str, start: date, end: date) -> pd.DataFrame:
        path = self.folder / "index" / INDEX_FILES[kind]
        if code != "000300" or not path.exists():
            return empty_index()
        raw = read_csv_file(path)
        levels = conform_index(
            pd.DataFrame(
                {
                    "date": self._column(raw, "date", path),
                    "code": code,
                    "close": self._column(raw, "close", path),
                    "kind": kind,
                }
            )
        )
        inside = (levels["date"] >= pd.Timestamp(start)) & (levels["date"] <= pd.Timestamp(end))
        return levels.loc[inside | levels["date"].isna()].reset_index(drop=True)

    def membership(self) -> pd.DataFrame:
        path = self.folder / "membership.csv"
        if not path.exists():
            return pd.DataFrame(columns=["effective_date", "symbol", "name"])
        raw = read_csv_file(path)
        codes = raw["symbol"] if "symbol" in raw.columns else raw.get("code")
        if codes is None or "effective_date" not in raw.columns:
            raise DataValidationError(f"{path}: needs columns effective_date and symbol (or code)")
        return conform_membership(
            pd.DataFrame(
                {
                    "effective_date": raw["effective_date"],
                    "symbol": codes.map(symbol_or_text),
                    "name": raw.get("name", ""),
                }
            )
        )
