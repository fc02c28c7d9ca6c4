"""Terminal tables: no cell is ever cut, on a pipe (no width limit) or on a narrow terminal
(parts)."""

from __future__ import annotations

import io
import json
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from oomrl.artifacts import NAV_COLUMNS, nav_rows, numeric_titles
from oomrl.ops.cli import app
from oomrl.ops.commands.tables import column_groups, print_rows, table_width

NAV = pd.DataFrame(
    {
        "date": pd.to_datetime(["2026-02-10", "2026-02-11"]),
        "nav": [9_976_221.98, 10_073_124.11],
        "cash": [253_375.5, 165_744.11],
        "market_value": [9_722_846.48, 9_907_380.0],
        "realized_return": [-0.002377802, 0.01147],
        "frictionless_return": [-0.00095, 0.01238],
        "slippage_leakage": [0.00143, 0.00091],
        "turnover": [0.974, 0.806],
        "costs": [16_825.68, 15_262.75],
        "reward": [-0.00263, 0.01137],
        "principal_loss": [0.0024, -0.0073],
    }
)


def _printed(width: int) -> str:
    out = io.StringIO()
    print_rows(Console(file=out, width=width), nav_rows(NAV), "NAV", numeric_titles(NAV_COLUMNS))
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 80, 120, 10_000])
def test_every_cell_is_printed_whole_at_any_width(width: int) -> None:
    text = _printed(width)
    assert "…" not in text and "00:00:00" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for row in nav_rows(NAV):
        for value in row.values():
            assert value in text, (width, value)


def test_a_narrow_terminal_gets_parts_each_led_by_the_date() -> None:
    rows = nav_rows(NAV)
    groups = column_groups(list(rows[0]), rows, 80)
    assert len(groups) > 1 and all(group[0] == "date" for group in groups)
    assert sorted({title for group in groups for title in group}) == sorted(rows[0])
    assert all(table_width(group, rows, True) <= 80 for group in groups)
    assert "NAV, part 1 of" in _printed(80) and "part" not in _printed(10_000)


@pytest.mark.slow  # copies a prepared OOMRL_HOME (the session fixture ingests the sample)
def test_account_show_on_a_pipe_prints_whole_numbers_dates_and_labelled_percentages(
    home: Path,
) -> None:
    from oomrl.portfolio.service import open_ledger
    from oomrl.settings import get_settings

    nav = open_ledger(get_settings()).nav_frame("paper")
    # CliRunner's stdout is a pipe, not a terminal
    result = CliRunner().invoke(app, ["account", "show"])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and "00:00:00" not in result.output
    assert f"{nav['nav'].iloc[-1]:,.2f}" in result.output and "2024-07-01" in result.output
    assert "realized return (%)" in result.output and "principal loss (%)" in result.output
    shown = json.loads(CliRunner().invoke(app, ["account", "show", "--json"]).output)
    assert shown["nav"][-1]["nav"] == pytest.approx(nav["nav"].iloc[-1])
    assert shown["booked_to"] == date(2024, 7, 1).isoformat()
