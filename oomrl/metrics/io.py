"""Read and validate the metrics inputs: daily return series from CSV files, frames or levels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from oomrl.errors import MetricsInputError

MIN_OBSERVATIONS = 2  # a sample standard deviation (ddof=1) needs two points


def _dates(values: pd.Series | pd.Index, name: str) -> pd.DatetimeIndex:
    """Parse dates strictly: any unparsable value is an error naming the first bad one."""
    parsed = pd.to_datetime(pd.Series(values), errors="coerce")
    bad = parsed.isna()
    if bad.any():
        first = pd.Series(values)[bad.to_numpy()].iloc[0]
        raise MetricsInputError(f"{name}: {int(bad.sum())} unparsable date(s), first {first!r}")
    index = pd.DatetimeIndex(parsed)
    if index.tz is not None:
        index = index.tz_localize(None)
    return index.normalize()


def validate_returns(returns: pd.Series, name: str = "returns") -> pd.Series:
    """Check a daily simple-return series: dated, sorted, unique, finite, > -100 %, at least 2
    points."""
    if not isinstance(returns, pd.Series):
        raise MetricsInputError(
            f"{name}: expected a pandas Series of daily returns, got {type(returns).__name__}"
        )
    if returns.empty:
        raise MetricsInputError(f"{name}: the series is empty")
    series = pd.Series(
        pd.to_numeric(returns, errors="coerce").to_numpy(dtype=float),
        index=_dates(returns.index, name),
        name=name,
    )
    if not series.index.is_unique:
        dupes = series.index[series.index.duplicated()].unique()
        raise MetricsInputError(
            f"{name}: duplicate date(s) {', '.join(d.date().isoformat() for d in dupes[:3])}"
        )
    series = series.sort_index()
    missing = series.isna()
    if missing.any():
        raise MetricsInputError(
            f"{name}: {int(missing.sum())} missing (NaN) value(s), first on "
            f"{series.index[missing.to_numpy()][0].date().isoformat()}"
        )
    if not np.isfinite(series.to_numpy()).all():
        raise MetricsInputError(f"{name}: infinite value(s)")
    if (series <= -1.0).any():
        first = series.index[(series <= -1.0).to_numpy()][0].date().isoformat()
        raise MetricsInputError(
            f"{name}: a daily return of -100 % or worse on {first} (is it in percent?)"
        )
    if len(series) < MIN_OBSERVATIONS:
        raise MetricsInputError(
            f"{name}: {len(series)} observation(s); at least {MIN_OBSERVATIONS} are needed"
        )
    return series


def returns_from_levels(levels: pd.Series, name: str = "levels") -> pd.Series:
    """Daily simple returns of a level series (close / previous close − 1).

    The first level has no return."""
    if levels.empty:
        raise MetricsInputError(f"{name}: the series is empty")
    values = pd.Series(
        pd.to_numeric(levels, errors="coerce").to_numpy(dtype=float),
        index=_dates(levels.index, name),
        name=name,
    )
    if not values.index.is_unique:
        raise MetricsInputError(f"{name}: duplicate dates")
    values = values.sort_index()
    if values.isna().any():
        first = values.index[values.isna().to_numpy()][0].date().isoformat()
        raise MetricsInputError(
            f"{name}: {int(values.isna().sum())} missing (NaN) level(s), first on {first}"
        )
    if (values <= 0).any() or not np.isfinite(values.to_numpy()).all():
        raise MetricsInputError(f"{name}: levels must be finite and positive")
    return validate_returns(values.pct_change().iloc[1:].rename(name), name)


def read_returns_csv(path: str | Path, name: str | None = None) -> pd.Series:
    """Daily returns from a CSV with a `date` column and either `return` or `close` (a level)."""
    path = Path(path)
    label = name or path.name
    if not path.exists():
        raise MetricsInputError(f"{label}: file {path} does not exist")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise MetricsInputError(f"{label}: cannot read {path} as CSV ({exc})") from exc
    columns = {str(c).strip().lower(): c for c in frame.columns}
    if "date" not in columns:
        raise MetricsInputError(
            f"{label}: no `date` column (columns: {', '.join(map(str, frame.columns))})"
        )
    dates = frame[columns["date"]]
    if "return" in columns:
        return validate_returns(pd.Series(frame[columns["return"]].to_numpy(), index=dates), label)
    if "close" in columns:
        return returns_from_levels(
            pd.Series(frame[columns["close"]].to_numpy(), index=dates), label
        )
    raise MetricsInputError(
        f"{label}: needs a `return` or a `close` column "
        f"(columns: {', '.join(map(str, frame.columns))})"
    )


def window(
    returns: pd.Series,
    start: str | pd.Timestamp | None = None,
    end: str | pd.Timestamp | None = None,
    name: str = "returns",
) -> pd.Series:
    """The returns dated within [start, end]; an empty result is an error naming the window."""
    lo = pd.Timestamp(start) if start is not None else None
    hi = pd.Timestamp(end) if end is not None else None
    if lo is not None and hi is not None and lo > hi:
        raise MetricsInputError(f"{name}: window start {lo.date()} is after its end {hi.date()}")
    part = returns.loc[lo:hi]
    if part.empty:
        span = (
            f"{returns.index[0].date()}..{returns.index[-1].date()}" if len(returns) else "no dates"
        )
        raise MetricsInputError(
            f"{name}: no returns in {lo.date() if lo is not None else '…'}.."
            f"{hi.date() if hi is not None else '…'} (data covers {span})"
        )
    return part


def _label(series: object, default: str) -> str:
    """The series' own name when it has a string one, else `default` (used in error messages)."""
    name = getattr(series, "name", None)
    return name if isinstance(name, str) and name else default


def align(returns: pd.Series, benchmark: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Portfolio and benchmark returns on the same dates.

    The benchmark may extend beyond the portfolio's span. But every portfolio date must have a
    benchmark return. Silently dropping days would change every number, so a gap is an error.
    """
    r = validate_returns(returns, _label(returns, "returns"))
    b = validate_returns(benchmark, _label(benchmark, "benchmark"))
    common = r.index.intersection(b.index)
    if common.empty:
        raise MetricsInputError(
            "benchmark does not overlap the returns: returns "
            f"{r.index[0].date()}..{r.index[-1].date()}, "
            f"benchmark {b.index[0].date()}..{b.index[-1].date()}"
        )
    missing = r.index.difference(b.index)
    if len(missing):
        shown = ", ".join(d.date().isoformat() for d in missing[:3])
        raise MetricsInputError(
            f"misaligned dates: {len(missing)} return date(s) have no benchmark return "
            f"(first: {shown})"
        )
    return r, b.loc[r.index]
