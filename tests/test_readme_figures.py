"""The README's and docs' figures that a test can keep, read from the pages themselves and measured
again: the paper-trading table of the README and the CSI 300 phases table of docs/metrics.md. (The
demo's Table 1 needs the whole demo, two repairs included: `make demo` prints it, to the digit.)"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
METRICS = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")


def table_row(page: str, first_cell: str) -> list[str]:
    """The cells of the markdown table row that starts with `first_cell`."""
    (line,) = [line for line in page.splitlines() if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def number(text: str) -> float:
    """A printed figure as a number: thousands separators, unicode minus, a trailing % are undone."""
    return float(re.sub(r"[ ,%+]", "", text.replace("−", "-")))


@pytest.mark.slow  # three replays of 402 sessions on the bundled sample
@pytest.mark.parametrize(("row", "strategy", "kill_threshold"), [
    ("daily_momentum (halted by the kill switch 2024-08-26)", "daily_momentum", None),
    ("daily_momentum, kill switch off", "daily_momentum", 1.0),
    ("weekly_liquidity", "weekly_liquidity", None)])
def test_the_readmes_paper_trading_table(row: str, strategy: str, kill_threshold: float | None,
                                          tmp_path: Path) -> None:
    from oomrl.config import get_settings
    from oomrl.portfolio.service import run_replay

    settings = get_settings(home=tmp_path / "home", ledger_url=None)
    summary = run_replay(settings, strategy, date(2024, 7, 1), date(2026, 2, 27),
                         kill_threshold=kill_threshold).summary()
    turnover, costs, leakage, net = (number(cell) for cell in table_row(README, row)[1:])
    assert round(summary["turnover"], 2) == turnover
    assert round(summary["total_costs"]) == costs
    assert round(summary["slippage_leakage"] * 100, 2) == leakage
    assert round(summary["net_return"] * 100, 2) == net
    halted = re.search(r"halted by the kill switch (\d{4}-\d{2}-\d{2})", row)
    assert str(summary["halted_on"]) == (halted.group(1) if halted else "None")


@pytest.mark.slow  # writes a report of 402 sessions
def test_the_phases_table_of_docs_metrics(tmp_path: Path) -> None:
    from oomrl.metrics.io import read_returns_csv
    from oomrl.metrics.performance import read_phases
    from oomrl.metrics.tearsheet import build_report

    fixtures = REPO / "tests" / "fixtures" / "metrics"
    report = build_report(read_returns_csv(fixtures / "csi300_price_2024-06_2026-03.csv"), tmp_path,
                          phases=read_phases(fixtures / "table1_phases.csv"))
    summary = report.markdown.read_text(encoding="utf-8")
    written = summary.split("## Per strategy version", 1)[1].split("\n## ", 1)[0]  # the phases table
    for first in ("From", "To", "Sessions", "Annualized return (% a year)", "CAGR (% a year)",
                  "Cumulative return (%)", "Volatility (% a year)", "Sharpe ratio", "Max drawdown (%)"):
        assert table_row(written, first) == table_row(METRICS, first), first
