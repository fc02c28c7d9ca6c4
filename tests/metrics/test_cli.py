"""`oomrl metrics` and `oomrl report` through the real typer app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomrl.metrics.performance import METRIC_KEYS
from oomrl.ops.cli import app
from tests.metrics.conftest import CSI300_PRICE, CSI300_TOTAL_RETURN, TABLE1_PHASES

runner = CliRunner()


@pytest.mark.parametrize(
    "start, end, sessions, annual",
    [
        ("2024-07-01", "2026-02-27", 402, 0.2116),
        ("2024-07-01", "2024-10-18", 73, 0.4816),
        ("2024-10-21", "2025-09-30", 235, 0.1922),
        ("2025-10-09", "2026-02-27", 94, 0.0504),
    ],
)
def test_metrics_reproduces_the_table1_benchmark_row(
    start: str, end: str, sessions: int, annual: float
) -> None:
    result = runner.invoke(
        app,
        [
            "metrics",
            "--returns",
            str(CSI300_PRICE),
            "--benchmark",
            str(CSI300_PRICE),
            "--start",
            start,
            "--end",
            end,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    values = json.loads(result.stdout)
    assert tuple(values) == METRIC_KEYS
    assert values["trading_days"] == sessions
    assert round(values["annualized_return"], 4) == annual
    assert values["beta"] == pytest.approx(1.0)


def test_metrics_table_output() -> None:
    result = runner.invoke(
        app,
        [
            "metrics",
            "--returns",
            str(CSI300_PRICE),
            "--benchmark",
            str(CSI300_TOTAL_RETURN),
            "--rf",
            "0.015",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "information_ratio" in result.stdout and "%" in result.stdout


def test_metrics_bad_input_exits_1_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("date,return\n2025-01-02,0.01\n2025-01-03,nan\n")
    result = runner.invoke(
        app, ["metrics", "--returns", str(bad), "--benchmark", str(CSI300_PRICE)]
    )
    assert result.exit_code == 1
    assert "missing (NaN) value(s), first on 2025-01-03" in result.stderr
    far = tmp_path / "far.csv"
    far.write_text("date,return\n2010-01-04,0.01\n2010-01-05,0.02\n")
    result = runner.invoke(
        app, ["metrics", "--returns", str(far), "--benchmark", str(CSI300_PRICE)]
    )
    assert result.exit_code == 1 and "does not overlap" in result.stderr


@pytest.mark.slow
def test_report_on_a_plain_series_with_phases(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "report",
            "--returns",
            str(CSI300_PRICE),
            "--phases",
            str(TABLE1_PHASES),
            "--out",
            str(tmp_path / "rep"),
        ],
    )
    assert result.exit_code == 0, result.output
    paths = [Path(line) for line in result.stdout.split()]
    assert [p.name for p in paths] == [
        "tearsheet.html",
        "summary.md",
        "tearsheet.png",
        "equity.png",
        "underwater.png",
    ]
    assert all(p.exists() for p in paths)
    summary = paths[1].read_text()
    for row in (
        "|  | Whole study | Phase 1 | Phase 2 | Phase 3 |",
        "| From | 2024-07-01 | 2024-07-01 | 2024-10-21 | 2025-10-09 |",
        "| To | 2026-02-27 | 2024-10-18 | 2025-09-30 | 2026-02-27 |",
        "| Sessions | 402 | 73 | 235 | 94 |",
        "| Annualized return (% a year) | 21.16 % | 48.16 % | 19.22 % | 5.04 % |",
    ):
        assert row in summary


@pytest.mark.slow
def test_report_default_folder_and_benchmark_csv(oomrl_home: Path) -> None:
    result = runner.invoke(
        app,
        [
            "report",
            "--returns",
            str(CSI300_PRICE),
            "--benchmark-csv",
            str(CSI300_TOTAL_RETURN),
            "--benchmark",
            "total_return",
        ],
    )
    assert result.exit_code == 0, result.output
    html = Path(result.stdout.split()[0])
    assert html.parent.parent == oomrl_home / "runs" and "total-return" in html.read_text()


def test_report_needs_exactly_one_source() -> None:
    result = runner.invoke(app, ["report"])
    assert result.exit_code == 2 and "exactly one of --account or --returns" in result.stderr
