"""The friction section's numbers, checked against the ledger's own rows with SQL."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa

from oomrl.metrics.friction import account_friction, friction_row
from oomrl.metrics.labels import format_value
from oomrl.metrics.performance import Phase
from oomrl.metrics.short_window import too_short
from tests.metrics.traded_account import ACCOUNT, TradedAccount

KINDS = ("commission", "stamp_duty", "transfer_fee", "impact_cost")


def _sql(traded: TradedAccount, query: str, **params: Any) -> list[Any]:
    with traded.ledger.engine.connect() as conn:
        return list(conn.execute(sa.text(query), params).one())


def _by_version(report: Any) -> dict[str, dict[str, Any]]:
    return {row["version"]: row for row in report.friction.by_version.to_dict("records")}


@pytest.mark.parametrize("tag", ["v1", "v2"])
def test_per_version_figures_are_the_ledger_sums(
    traded: TradedAccount, traded_report: Any, tag: str
) -> None:
    sha = traded.v1 if tag == "v1" else traded.v2
    row = _by_version(traded_report)[f"{tag} daily_momentum"]
    sessions, rebalances, turnover, costs, leakage, drag = _sql(
        traded,
        "SELECT count(*), sum(turnover > 0), sum(turnover), sum(costs), sum(slippage_leakage), "
        "sum(costs * (1 + realized_return) / nav) FROM nav WHERE account = :a AND "
        "strategy_version = :v",
        a=ACCOUNT,
        v=sha,
    )
    assert row["sessions"] == sessions and row["rebalances"] == rebalances > 0
    assert row["turnover"] == pytest.approx(turnover, rel=1e-9)
    assert row["costs_total"] == pytest.approx(costs, rel=1e-9)
    assert row["slippage_leakage"] == pytest.approx(leakage, rel=1e-9, abs=1e-12)
    annualized = {
        "turnover_annualized": turnover,
        "slippage_leakage_annualized": leakage,
        "cost_drag": drag,
    }
    for key, total in annualized.items():
        if too_short(sessions):  # the report leaves a too-short version's annualized figures out
            assert row[key] is None, key
        else:
            assert row[key] == pytest.approx(total / sessions * 252, rel=1e-9, abs=1e-12), key
    # fills are attributed through their rebalance's version: a path independent of the date spans
    fills = _sql(
        traded,
        "SELECT count(*), "
        + ", ".join(f"sum(f.{k})" for k in KINDS)
        + ", avg(f.adv_participation), max(f.adv_participation), avg(f.adv_participation > 0.05)"
        " FROM fills f JOIN rebalances r ON r.id = f.rebalance_id"
        " WHERE r.account = :a AND r.strategy_version = :v",
        a=ACCOUNT,
        v=sha,
    )
    assert row["fills"] == fills[0] > 0
    for kind, total in zip(KINDS, fills[1:5], strict=True):
        assert row[kind] == pytest.approx(total, rel=1e-9, abs=1e-9)
    assert row["adv_participation_mean"] == pytest.approx(fills[5], rel=1e-9)
    assert row["adv_participation_max"] == pytest.approx(fills[6], rel=1e-9)
    assert row["fills_over_cap"] == pytest.approx(fills[7], abs=1e-12)


def test_whole_window_and_the_story_it_tells(traded: TradedAccount, traded_report: Any) -> None:
    rows = _by_version(traded_report)
    assert list(rows) == ["v1 daily_momentum", "v2 daily_momentum", "whole window"]
    total_costs, sessions = _sql(
        traded, "SELECT sum(costs), count(*) FROM nav WHERE account = :a", a=ACCOUNT
    )
    assert rows["whole window"]["costs_total"] == pytest.approx(total_costs, rel=1e-9)
    assert rows["whole window"]["sessions"] == sessions
    # costs booked on the NAV rows are exactly the fills' costs: nothing is estimated
    fill_costs = _sql(
        traded, "SELECT sum(" + " + ".join(KINDS) + ") FROM fills WHERE account = :a", a=ACCOUNT
    )
    assert total_costs == pytest.approx(fill_costs[0], rel=1e-9)
    # daily trading (v1) turns the book over far faster than weekly trading (v2)
    v1, v2 = rows["v1 daily_momentum"], rows["v2 daily_momentum"]
    assert v1["turnover"] / v1["sessions"] > 1.5 * v2["turnover"] / v2["sessions"]


def test_month_by_month_matches_the_ledger(traded: TradedAccount, traded_report: Any) -> None:
    monthly = traded_report.friction.by_month.set_index("month")
    with traded.ledger.engine.connect() as conn:
        expected = pd.read_sql(
            sa.text(
                "SELECT strftime('%Y-%m', date) AS month, sum(turnover) AS turnover, "
                "sum(costs * (1 + realized_return) / nav) AS cost_bps, "
                "sum(slippage_leakage) AS leakage_bps "
                "FROM nav WHERE account = :a GROUP BY month ORDER BY month"
            ),
            conn,
            params={"a": ACCOUNT},
        )
        fills = pd.read_sql(
            sa.text(
                "SELECT strftime('%Y-%m', date) AS month, count(*) AS fills, "
                "avg(adv_participation) AS adv FROM fills WHERE account = :a GROUP BY month"
            ),
            conn,
            params={"a": ACCOUNT},
        ).set_index("month")
    assert (
        list(monthly.index)
        == list(expected["month"])
        == ["2025-01", "2025-02", "2025-03", "2025-04", "2025-05"]
    )
    for column in ("turnover", "cost_bps", "leakage_bps"):
        assert monthly[column].to_numpy() == pytest.approx(
            expected[column].to_numpy(), rel=1e-9, abs=1e-12
        )
    assert monthly["fills"].to_dict() == fills["fills"].to_dict()
    assert monthly["adv_participation_mean"].to_numpy() == pytest.approx(
        fills["adv"].to_numpy(), rel=1e-9
    )


def test_the_rendered_section_shows_the_ledger_figures(
    traded: TradedAccount, traded_report: Any
) -> None:
    rows = _by_version(traded_report)
    summary = traded_report.markdown.read_text()
    page = traded_report.html.read_text()
    v2 = rows["v2 daily_momentum"]
    line = (
        "| Costs paid (CNY) | "
        f"{format_value('costs_total', rows['v1 daily_momentum']['costs_total'])} | "
        f"{format_value('costs_total', v2['costs_total'])} | "
        f"{format_value('costs_total', rows['whole window']['costs_total'])} |"
    )
    assert line in summary
    assert (
        "| Turnover (× NAV a year) | " in summary
        and format_value("turnover_annualized", v2["turnover_annualized"]) in summary
    )
    assert "Friction: turnover, costs, slippage leakage, ADV participation" in page
    assert 'title="Frictionless return − realized return, summed' in page  # the definition on hover
    assert "friction.png" in {p.name for p in traded_report.pngs}


def test_an_account_that_never_traded_has_no_friction_section() -> None:
    dates = pd.bdate_range("2025-01-02", periods=5)
    nav = pd.DataFrame(
        {
            "date": dates,
            "nav": 1e6,
            "realized_return": 0.0,
            "turnover": 0.0,
            "costs": 0.0,
            "slippage_leakage": 0.0,
        }
    )
    friction = account_friction(nav, pd.DataFrame(), [Phase("v1", dates[0], dates[-1])])
    assert (
        friction.by_version.loc[0, "rebalances"] == 0 and friction.by_version.loc[0, "fills"] == 0
    )
    assert friction.by_version.loc[0, "adv_participation_mean"] is None
    assert (
        friction_row(nav.iloc[:0], pd.DataFrame(columns=[*KINDS, "adv_participation"]))[
            "turnover_annualized"
        ]
        is None
    )


def test_the_one_page_png_puts_friction_under_each_versions_performance(traded_report: Any) -> None:
    import matplotlib.image as mpimg

    from oomrl.metrics.tearsheet_png import _version_table

    grid = _version_table(traded_report)
    assert grid is not None and [c.text for c in grid.header] == [
        "",
        "v1 daily_momentum",
        "v2 daily_momentum",
    ]
    names = [row[0].text for row in grid.rows]
    assert names.index("Information ratio") < names.index("Turnover (× NAV a year)")
    v1 = _by_version(traded_report)["v1 daily_momentum"]
    turnover = grid.rows[names.index("Turnover (× NAV a year)")]
    assert turnover[1].text == format_value("turnover_annualized", v1["turnover_annualized"])
    height, width = mpimg.imread(traded_report.summary_png).shape[:2]
    assert width == 1400 and height > 1200
