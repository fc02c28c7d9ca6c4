"""Alert, repair and promotion marks: their dates come from the ledger, and the charts draw them
there."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import matplotlib.dates as mdates
import pandas as pd
import sqlalchemy as sa
from matplotlib.figure import Figure

from oomrl.metrics import charts
from oomrl.metrics.attribution import account_returns
from oomrl.metrics.marks import Mark, promotion_marks, repair_marks
from tests.metrics.traded_account import ACCOUNT, SWITCH, TradedAccount


def _dates(marks: list[Mark], kind: str) -> list[pd.Timestamp]:
    return [m.date for m in marks if m.kind == kind]


def test_alert_marks_are_the_ledgers_alerts(traded: TradedAccount, traded_report: Any) -> None:
    stored = traded.ledger.alerts(ACCOUNT)
    assert len(stored) >= 3, "the weekly diagnostics should have raised alerts on this account"
    expected = sorted(
        (pd.Timestamp(a["as_of"]), a["rule"], a["payload"]["severity"]) for a in stored
    )
    shown = sorted((m.date, m.label, m.severity) for m in traded_report.marks if m.kind == "alert")
    assert shown == expected


def test_promotion_mark_is_the_first_session_of_the_promoted_version(
    traded: TradedAccount, traded_report: Any
) -> None:
    with traded.ledger.engine.connect() as conn:
        first = conn.execute(
            sa.text("SELECT min(date) FROM nav WHERE account = :a AND strategy_version = :v"),
            {"a": ACCOUNT, "v": traded.v2},
        ).scalar()
        activated = [
            row[0]
            for row in conn.execute(
                sa.text("SELECT sha FROM strategy_versions WHERE account = :a ORDER BY id"),
                {"a": ACCOUNT},
            )
        ]
    assert activated == [traded.v1, traded.v2]  # v1 at the start, v2 by the promotion
    promotions = [m for m in traded_report.marks if m.kind == "promotion"]
    assert [(m.date, m.label) for m in promotions] == [(pd.Timestamp(first), "v2 daily_momentum")]
    assert pd.Timestamp(first).date() == SWITCH


def test_repair_marks_come_from_the_repair_folders(
    traded: TradedAccount, traded_report: Any
) -> None:
    repairs = [(m.date.date(), m.label) for m in traded_report.marks if m.kind == "repair"]
    assert repairs == [(SWITCH, "promoted → v2"), (date(2025, 4, 7), "failed")]


def test_the_charts_draw_each_mark_on_its_date(traded: TradedAccount, traded_report: Any) -> None:
    returns, _ = account_returns(traded.ledger.nav_frame(ACCOUNT), ACCOUNT)
    for draw in ("equity", "rolling_ir"):
        ax = Figure().add_subplot()
        if draw == "equity":
            charts.draw_equity(ax, returns, None, marks=traded_report.marks)
        else:
            charts.draw_rolling_ir(ax, returns, returns * 0.5, marks=traded_report.marks)
        triangles = [x for line in ax.lines if line.get_marker() == "^" for x in line.get_xdata()]
        diamonds = [x for line in ax.lines if line.get_marker() == "D" for x in line.get_xdata()]
        verticals = [
            line.get_xdata()[0]
            for line in ax.lines
            if line.get_linestyle() == "--" and line.get_color() == charts.PROMOTION_COLOR
        ]
        alerts = _dates(traded_report.marks, "alert")
        assert set(triangles) <= set(alerts) and triangles  # each marker on an alert's session ...
        counts = [int(t.get_text()) for t in ax.texts if t.get_text().isdigit()]
        # ... standing for all of them
        assert len(triangles) - len(counts) + sum(counts) == len(alerts)
        assert diamonds == _dates(traded_report.marks, "repair")
        assert [
            mdates.num2date(mdates.date2num(v)).date()
            if not isinstance(v, pd.Timestamp)
            else v.date()
            for v in verticals
        ] == [d.date() for d in _dates(traded_report.marks, "promotion")]
        texts = [t.get_text().strip() for t in ax.texts]
        assert "v2 daily_momentum" in texts
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "repair started" in legend and "new version trades" in legend


def test_a_critical_alert_is_drawn_above_a_warning_of_the_same_day() -> None:
    day = pd.Timestamp("2024-09-02")
    for order in (("critical", "warning"), ("warning", "critical")):
        marks = [Mark(date=day, kind="alert", label=f"{s} rule", severity=s) for s in order]
        ax = Figure().add_subplot()
        charts._mark(ax, marks)
        # The order they are painted in
        drawn = sorted(ax.lines, key=lambda line: line.get_zorder())
        assert drawn[-1].get_color() == charts.ALERT_COLORS["critical"], order


def test_every_mark_is_listed_in_the_tearsheet(traded_report: Any) -> None:
    page = traded_report.html.read_text()
    summary = traded_report.markdown.read_text()
    assert f"Alerts, repairs and promotions ({len(traded_report.marks)})" in page
    for mark in traded_report.marks:
        assert f"| {mark.date.date()} | {mark.kind} |" in summary


def test_version_labels_replace_shas_everywhere(traded: TradedAccount, traded_report: Any) -> None:
    assert list(traded_report.phases["phase"]) == ["v1 daily_momentum", "v2 daily_momentum"]
    for text in (traded_report.html.read_text(), traded_report.markdown.read_text()):
        assert traded.v1[:8] not in text and traded.v2[:8] not in text


def test_marks_without_labels_and_broken_repair_folders(tmp_path: Path) -> None:
    versions = pd.Series(
        ["a" * 40, "a" * 40, "b" * 40, "a" * 40], index=pd.bdate_range("2025-01-06", periods=4)
    )
    marks = promotion_marks(versions)
    assert [(m.date.date(), m.label) for m in marks] == [
        (date(2025, 1, 8), "b" * 12),
        (date(2025, 1, 9), "a" * 12),
    ]
    (tmp_path / "repair-1").mkdir()
    (tmp_path / "repair-1" / "autopsy.json").write_text("{not json")
    (tmp_path / "repair-2").mkdir()
    (tmp_path / "repair-2" / "autopsy.json").write_text(
        '{"account": "other", "as_of": "2025-01-06"}'
    )
    (tmp_path / "repair-3").mkdir()
    (tmp_path / "repair-3" / "autopsy.json").write_text('{"account": "me", "as_of": "2025-01-07"}')
    assert [(m.date.date(), m.label) for m in repair_marks(tmp_path, "me")] == [
        (date(2025, 1, 7), "unfinished")
    ]


def test_a_probations_start_and_decision_are_drawn_on_their_dates() -> None:
    from oomrl.metrics.marks import probation_marks

    rows = [
        {
            "tag": "v2",
            "opened_on": date(2024, 7, 12),
            "decided_on": date(2024, 8, 9),
            "status": "promoted",
        },
        {"tag": "v3", "opened_on": date(2024, 9, 2), "decided_on": None, "status": "open"},
    ]
    marks = probation_marks(rows)
    assert [(m.kind, m.date.date(), m.label) for m in marks] == [
        ("probation", date(2024, 7, 12), "v2 on probation"),
        ("decision", date(2024, 8, 9), "v2 promoted"),
        ("probation", date(2024, 9, 2), "v3 on probation"),
    ]
    ax = Figure().add_subplot()
    ax.set_xlim(pd.Timestamp("2024-07-01"), pd.Timestamp("2024-10-31"))
    charts._mark(ax, marks)
    drawn = [
        (line.get_linestyle(), pd.Timestamp(line.get_xdata()[0]).date())
        for line in ax.lines
        if line.get_color() == charts.PROBATION_COLOR
    ]
    assert drawn == [(":", date(2024, 7, 12)), ("-.", date(2024, 8, 9)), (":", date(2024, 9, 2))]
    assert {t.get_text().strip() for t in ax.texts} == {
        "v2 on probation",
        "v2 promoted",
        "v3 on probation",
    }
    ax.legend()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["probation starts", "probation decided"]
