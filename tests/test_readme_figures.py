"""The README's and docs' figures that a test can keep, read from the pages themselves and measured
again: the paper-trading table of the README and the CSI 300 phases table of docs/metrics.md, and
the demo's Table 1, probation and friction story (one whole default `oomrl demo`, its repair and
probation included)."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
METRICS = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")


def table_row(page: str, first_cell: str) -> list[str]:
    """The cells of the markdown table row that starts with `first_cell`."""
    (line,) = [line for line in page.splitlines() if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def number(text: str) -> float:
    """A printed figure as a number: thousands separators, unicode minus, a trailing % are
    undone."""
    return float(re.sub(r"[ ,%+]", "", text.replace("−", "-")))


@pytest.mark.slow  # three replays of 402 sessions on the bundled sample
@pytest.mark.parametrize(
    ("row", "strategy", "kill_threshold"),
    [
        ("daily_momentum (halted by the kill switch 2024-08-26)", "daily_momentum", None),
        ("daily_momentum, kill switch off", "daily_momentum", 1.0),
        ("weekly_liquidity", "weekly_liquidity", None),
    ],
)
def test_the_readmes_paper_trading_table(
    row: str, strategy: str, kill_threshold: float | None, tmp_path: Path
) -> None:
    from oomrl.portfolio.service import run_replay
    from oomrl.settings import get_settings

    settings = get_settings(store={"home": tmp_path / "home"}, ledger={"url": None})
    summary = run_replay(
        settings, strategy, date(2024, 7, 1), date(2026, 2, 27), kill_threshold=kill_threshold
    ).summary()
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
    report = build_report(
        read_returns_csv(fixtures / "csi300_price_2024-06_2026-03.csv"),
        tmp_path,
        phases=read_phases(fixtures / "table1_phases.csv"),
    )
    summary = report.markdown.read_text(encoding="utf-8")
    written = summary.split("## Per strategy version", 1)[1].split("\n## ", 1)[
        0
    ]  # the phases table
    for first in (
        "From",
        "To",
        "Sessions",
        "Annualized return (% a year)",
        "CAGR (% a year)",
        "Cumulative return (%)",
        "Volatility (% a year)",
        "Sharpe ratio",
        "Max drawdown (%)",
    ):
        assert table_row(written, first) == table_row(METRICS, first), first


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report folder of one `oomrl demo` on its defaults (offline author, 20-session
    probation)."""
    from oomrl.ops.demo import run_demo

    summary = run_demo(
        home=tmp_path_factory.mktemp("demo") / "home",
        console=Console(width=160, record=True, force_terminal=False),
    )
    return Path(summary.demo_json).parent


def readme_cell(cell: str) -> float | None:
    """A README Table 1 cell as a number; — is a figure left out."""
    return None if cell == "—" else number(cell)


def demo_cell(key: str, value: float | None) -> float | None:
    """A demo Table 1 value rounded as the README prints it (percentages to 0.01 %, ratios to
    0.01)."""
    from oomrl.ops.demo import PERCENT_COLUMNS

    if value is None or value != value:  # None or NaN: left out
        return None
    if key == "trading_days":
        return float(int(value))
    return round(value * 100, 2) if key in PERCENT_COLUMNS else round(value, 2)


@pytest.mark.slow  # the whole default demo: a repair, its probation, the kill switch (~1-4 min)
@pytest.mark.parametrize(
    "row", ["v1 daily_momentum", "v2 daily_momentum (repaired)", "whole window"]
)
def test_the_readmes_table_1_is_what_the_demo_prints(row: str, demo_report: Path) -> None:
    from oomrl.ops.demo import TABLE1_COLUMNS

    records = {
        record["version"]: record
        for record in json.loads((demo_report / "demo.json").read_text())["table1"]
    }
    record = records[row.removesuffix(" (repaired)")]
    version, span, *cells = table_row(README, row)
    assert span == f"{record['start']} → {record['end']}", row
    for (key, label), cell in zip(TABLE1_COLUMNS, cells, strict=True):
        assert demo_cell(key, record[key]) == readme_cell(cell), f"{row}: {label}"


@pytest.mark.slow  # shares the demo above
def test_the_demos_repaired_version_passed_the_memorization_probes(demo_report: Path) -> None:
    repairs = json.loads((demo_report / "demo.json").read_text())["repairs"]
    promoted = [r for r in repairs if r["version"]]
    assert promoted, repairs
    for repair in promoted:
        checks = json.loads((Path(repair["run_dir"]) / "cross_validation.json").read_text())[
            "checks"
        ]
        (memorized,) = [c for c in checks if c["name"] == "crossval.memorized"]
        assert memorized["passed"] and "were the same" in memorized["detail"], memorized


@pytest.mark.slow  # shares the demo above
def test_the_readmes_friction_story_is_the_demos_tearsheet(demo_report: Path) -> None:
    story = re.search(
        r"in its (\d+) sessions v1 traded ([\d.]+)× its NAV \((\d+) % of it on each "
        r"rebalance\) and\s+"
        r"paid ([\d,]+) CNY in costs, ([\d.]+) % of NAV lost to slippage; in its (\d+) "
        r"sessions the "
        r"repaired v2 traded\s+([\d.]+)× its NAV \((\d+) % of it on each of its (\d+) "
        r"rebalances\) and "
        r"paid ([\d,]+) CNY",
        README,
    )
    assert story, "the README's friction sentence changed: keep this test with it"
    written = (demo_report / "summary.md").read_text(encoding="utf-8")
    friction = written.split("## Friction", 1)[1].split("\n## ", 1)[0]
    v1, v2 = 1, 2  # the cells of the version columns
    kept = [
        (table_row(friction, "Sessions")[v1], story.group(1)),
        (table_row(friction, "Turnover (× NAV)")[v1], story.group(2)),
        (table_row(friction, "Turnover per rebalance (%)")[v1], story.group(3)),
        (table_row(friction, "Costs paid (CNY)")[v1], story.group(4)),
        (table_row(friction, "Slippage leakage (%)")[v1], story.group(5)),
        (table_row(friction, "Sessions")[v2], story.group(6)),
        (table_row(friction, "Turnover (× NAV)")[v2], story.group(7)),
        (table_row(friction, "Turnover per rebalance (%)")[v2], story.group(8)),
        (table_row(friction, "Rebalances")[v2], story.group(9)),
        (table_row(friction, "Costs paid (CNY)")[v2], story.group(10)),
    ]
    # To the README's precision (105 % is 105.17 % rounded)
    for written_cell, readme_figure in kept:
        decimals = len(readme_figure.partition(".")[2])
        assert round(number(written_cell.rstrip("×")), decimals) == number(readme_figure), (
            readme_figure
        )


@pytest.mark.slow  # shares the demo above
def test_the_readmes_probation_story_is_the_demos(demo_report: Path) -> None:
    summary = json.loads((demo_report / "demo.json").read_text())
    story = re.search(
        r"from (\S+) it trades a shadow book `(\S+)`.*?On (\S+), after\s+(\d+) forward "
        r"sessions, the "
        r"chain (\w+) v2: net of friction over (\S+)\.\.(\S+) its shadow\s+lost ([\d.]+) % "
        r"against v1's "
        r"([\d.]+) % \(costs ([\d.]+) % of capital against ([\d.]+) %, turnover ([\d.]+)× "
        r"against\s+"
        r"([\d.]+)×\).*?halted it at (\S+)'s close,\s+([\d.]+) % down \(`account halted on (\S+)`",
        README,
        re.DOTALL,
    )
    assert story, "the README's probation story changed: keep this test with it"
    (probation,) = summary["probations"]
    evidence = probation["evidence"]
    by = {row["version"]: row for row in evidence["rows"]}
    challenger, champion = by["challenger"], by["champion"]
    assert (story.group(1), story.group(2)) == (evidence["start"], probation["shadow"])
    assert (story.group(3), int(story.group(4)), story.group(5)) == (
        probation["decided"],
        probation["sessions"],
        probation["decision"],
    )
    assert (story.group(6), story.group(7)) == (evidence["start"], evidence["end"])
    assert number(story.group(8)) == round(-challenger["net_return"] * 100, 2)
    assert number(story.group(9)) == round(-champion["net_return"] * 100, 2)
    assert number(story.group(10)) == round(challenger["costs_fraction"] * 100, 2)
    assert number(story.group(11)) == round(champion["costs_fraction"] * 100, 2)
    assert number(story.group(12)) == round(challenger["turnover"], 2)
    assert number(story.group(13)) == round(champion["turnover"], 2)
    whole = summary["table1"][-1]
    assert (story.group(14), number(story.group(15))) == (
        whole["end"],
        round(-whole["cumulative_return"] * 100, 2),
    )
    assert story.group(16) == summary["halted_on"]
