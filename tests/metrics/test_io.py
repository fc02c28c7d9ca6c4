"""Malformed metric inputs give a clear error naming the problem, never a number."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.errors import DataValidationError, MetricsInputError
from oomrl.metrics import performance as perf
from oomrl.metrics.io import align, read_returns_csv, returns_from_levels, validate_returns, window
from tests.metrics.conftest import CSI300_PRICE


def _write(tmp_path: Path, text: str, name: str = "r.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_close_csv_gives_returns_from_the_previous_close() -> None:
    r = read_returns_csv(CSI300_PRICE)
    levels = pd.read_csv(CSI300_PRICE, parse_dates=["date"]).set_index("date")["close"]
    assert r.index[0] == levels.index[1]
    assert r.iloc[0] == pytest.approx(levels.iloc[1] / levels.iloc[0] - 1)


def test_return_csv_is_read_as_is_and_sorted(tmp_path: Path) -> None:
    path = _write(tmp_path, "date,return\n2025-01-03,0.02\n2025-01-02,0.01\n")
    r = read_returns_csv(path)
    assert list(r) == [0.01, 0.02] and r.index[0] == pd.Timestamp("2025-01-02")


@pytest.mark.parametrize(
    "text, message",
    [
        ("date,return\n", "empty"),
        ("", "cannot read"),
        ("day,return\n2025-01-02,0.01\n", "no `date` column"),
        ("date,price\n2025-01-02,1\n", "needs a `return` or a `close` column"),
        (
            "date,return\n2025-01-02,0.01\n2025-01-03,\n",
            "missing (NaN) value(s), first on 2025-01-03",
        ),
        ("date,return\n2025-01-02,0.01\nnot-a-date,0.02\n", "unparsable date"),
        ("date,return\n2025-01-02,0.01\n2025-01-02,0.02\n", "duplicate date"),
        ("date,return\n2025-01-02,0.01\n", "at least 2"),
        ("date,return\n2025-01-02,0.01\n2025-01-03,-150\n", "-100 % or worse on 2025-01-03"),
        ("date,close\n2025-01-02,10\n2025-01-03,0\n", "finite and positive"),
        ("date,close\n2025-01-02,10\n2025-01-03,\n", "missing (NaN) level"),
        ("date,close\n2025-01-02,10\n2025-01-02,11\n", "duplicate dates"),
        ("date,return\n2025-01-02,0.01\n2025-01-03,inf\n", "infinite"),
    ],
)
def test_malformed_csv_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(MetricsInputError, match=None) as info:
        read_returns_csv(_write(tmp_path, text))
    assert message in str(info.value)
    assert isinstance(info.value, DataValidationError)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(MetricsInputError, match="does not exist"):
        read_returns_csv(tmp_path / "nope.csv")


def test_benchmark_that_does_not_overlap() -> None:
    r = pd.Series([0.01, 0.02], index=pd.to_datetime(["2025-01-02", "2025-01-03"]), name="returns")
    b = pd.Series(
        [0.01, 0.02], index=pd.to_datetime(["2024-01-02", "2024-01-03"]), name="benchmark"
    )
    with pytest.raises(MetricsInputError, match="does not overlap"):
        perf.compute_metrics(r, b)


def test_misaligned_dates_are_an_error_not_silently_dropped() -> None:
    r = pd.Series(
        [0.01, 0.02, 0.0], index=pd.to_datetime(["2025-01-02", "2025-01-03", "2025-01-06"])
    )
    b = pd.Series([0.01, 0.02], index=pd.to_datetime(["2025-01-02", "2025-01-03"]))
    with pytest.raises(MetricsInputError, match=r"misaligned dates: 1 return date.*2025-01-06"):
        align(r, b)


def test_longer_benchmark_is_cut_to_the_returns() -> None:
    b = pd.Series([0.01, 0.02, 0.03], index=pd.bdate_range("2025-01-02", periods=3))
    r = b.iloc[1:] * 2
    assert list(align(r, b)[1]) == [0.02, 0.03]


def test_not_a_series_and_nan_series() -> None:
    with pytest.raises(MetricsInputError, match="expected a pandas Series"):
        perf.compute_metrics([0.1, 0.2], pd.Series([0.1, 0.2]))  # type: ignore[arg-type]
    nan = pd.Series([0.01, np.nan], index=pd.bdate_range("2025-01-02", periods=2))
    with pytest.raises(MetricsInputError, match="NaN"):
        perf.compute_metrics(nan, nan)
    with pytest.raises(MetricsInputError, match="empty"):
        returns_from_levels(pd.Series([], dtype=float))


def test_bad_rf_and_constant_benchmark() -> None:
    r = pd.Series([0.01, 0.02, 0.0], index=pd.bdate_range("2025-01-02", periods=3))
    with pytest.raises(MetricsInputError, match="rf must be"):
        perf.compute_metrics(r, r, rf=float("nan"))
    with pytest.raises(MetricsInputError, match="constant"):
        perf.compute_metrics(r, pd.Series(0.001, index=r.index))


def test_window_errors() -> None:
    r = pd.Series([0.01, 0.02], index=pd.bdate_range("2025-01-02", periods=2))
    assert len(window(r, "2025-01-03")) == 1
    with pytest.raises(MetricsInputError, match="after its end"):
        window(r, "2025-02-01", "2025-01-01")
    with pytest.raises(MetricsInputError, match="no returns in 2026-01-01"):
        window(r, "2026-01-01")


def test_phase_files(tmp_path: Path) -> None:
    yml = _write(tmp_path, "phases:\n  - {name: a, start: 2025-01-02, end: 2025-01-03}\n", "p.yaml")
    assert perf.read_phases(yml)[0].name == "a"
    for text, message in [
        ("name,start\nx,2025-01-01\n", "needs name, start and end"),
        ("name,start,end\nx,2025-02-01,2025-01-01\n", "starts after it ends"),
        ("name,start,end\nx,yesterday-ish,2025-01-01\n", "bad date"),
        ("name,start,end\n", "lists no phases"),
    ]:
        with pytest.raises(MetricsInputError, match=message):
            perf.read_phases(_write(tmp_path, text, "p.csv"))
    with pytest.raises(MetricsInputError, match="does not exist"):
        perf.read_phases(tmp_path / "missing.csv")
    r = pd.Series([0.01, 0.02], index=pd.bdate_range("2025-01-02", periods=2))
    with pytest.raises(MetricsInputError, match="has no returns"):
        perf.phase_table(
            r, [perf.Phase("late", pd.Timestamp("2026-01-01"), pd.Timestamp("2026-02-01"))]
        )


def test_timezone_aware_dates_become_session_dates() -> None:
    stamps = pd.DatetimeIndex(["2025-01-02 15:00", "2025-01-03 15:00"]).tz_localize("Asia/Shanghai")
    r = validate_returns(pd.Series([0.01, 0.02], index=stamps))
    assert list(r.index) == [pd.Timestamp("2025-01-02"), pd.Timestamp("2025-01-03")]


def test_regression_input_errors() -> None:
    from oomrl.metrics.regression import ols

    y = pd.Series([0.01, 0.02, 0.03], index=pd.bdate_range("2025-01-02", periods=3))
    with pytest.raises(MetricsInputError, match="contain NaN"):
        ols(y, pd.DataFrame({"x": [0.01, np.nan, 0.02]}, index=y.index))
    with pytest.raises(MetricsInputError, match="more than 3 observations"):
        ols(y, pd.DataFrame({"x": [0.01, 0.03, 0.02], "z": [0.0, 0.1, 0.3]}, index=y.index))


def test_yaml_phase_list_without_wrapper(tmp_path: Path) -> None:
    path = _write(tmp_path, '[{"name": "a", "start": "2025-01-02", "end": "2025-01-03"}]', "p.json")
    assert [p.name for p in perf.read_phases(path)] == ["a"]
    wrapped = _write(tmp_path, "other: 1\n", "q.yml")
    with pytest.raises(MetricsInputError, match="lists no phases"):
        perf.read_phases(wrapped)
