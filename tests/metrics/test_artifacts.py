"""What the Prefect artifacts say: rounded values with units, version labels, images the UI can
load."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from oomrl.artifacts import (
    data_uri,
    fills_rows,
    metric_rows,
    nav_markdown,
    nav_rows,
    orders_rows,
    replay_rows,
    report_artifacts,
)
from oomrl.repair.crossval import CrossValidation, VersionMeasures, crossval_rows
from oomrl.report_links import ReportLinks
from oomrl.run_tags import alert_tag, strategy_tags

RAW_FLOAT = re.compile(r"\d\.\d{6,}")  # what the UI showed before: 1500.1234567 and the like


def test_fills_and_orders_are_rounded_with_units_in_the_headers() -> None:
    fill = {
        "date": "2025-01-02",
        "symbol": "600519.SH",
        "side": "buy",
        "quantity": 1200,
        "price": 1498.123456789,
        "frictionless_price": 1497.9876543,
        "commission": 449.43703,
        "stamp_duty": 0.0,
        "transfer_fee": 17.97748,
        "impact_cost": 161.2345678,
        "adv_participation": 0.000123456,
    }
    (row,) = fills_rows([fill])
    assert row == {
        "symbol": "600519.SH",
        "side": "buy",
        "shares": "1,200",
        "price (CNY)": "1,498.12",
        "frictionless price (CNY)": "1,497.99",
        "commission (CNY)": "449.44",
        "stamp duty (CNY)": "0.00",
        "transfer fee (CNY)": "17.98",
        "impact (CNY)": "161.23",
        "ADV participation (%)": "0.012 %",
    }
    (order,) = orders_rows(
        [
            {
                "symbol": "600519.SH",
                "side": "sell",
                "requested": 1500.0,
                "filled": 1200,
                "unfilled": 300,
                "reason": "adv_cap",
            }
        ]
    )
    assert order["requested (shares)"] == "1,500" and order["reason"] == "adv_cap"


def test_replay_and_crossval_rows_have_no_raw_floats() -> None:
    summary = {
        "strategy": "daily_momentum",
        "start": "2024-07-01",
        "end": "2024-12-31",
        "trading_days": 120,
        "rebalances": 120,
        "turnover_annualized": 239.7812345,
        "total_costs": 196968.123,
        "costs_fraction": 0.0196968123,
        "slippage_leakage": 0.0190312345,
        "frictionless_return": 0.05123456,
        "net_return": 0.0312345,
        "halted_on": None,
    }
    rows = replay_rows([summary])
    assert rows[0]["costs (CNY)"] == "196,968" and rows[0]["net return (%)"] == "3.12 %"
    assert rows[0]["halted on"] == "—"
    measures = {
        "version": "candidate",
        "sha": "0123456789abcdef0123",
        "trading_days": 60,
        "rebalances": 12,
        "max_rebalances_per_period": 1,
        "max_adv_participation": 0.04123456,
        "max_weekly_turnover": 0.2987654,
        "turnover": 3.4567891,
        "costs_fraction": 0.00412345,
        "net_return": -0.0123456,
        "information_ratio": None,
        "max_drawdown": -0.0812345,
        "halted_on": None,
        "dates": [date(2024, 7, 1), date(2024, 9, 27)],
        "returns": [0.01, -0.02],
    }
    cross = CrossValidation(
        start=date(2024, 9, 2),
        end=date(2024, 9, 27),
        checks=[],
        rows=[
            VersionMeasures(**{**measures, "window": window, "version": version})  # type: ignore[arg-type]
            for window in ("alert", "long")
            for version in ("candidate", "active")
        ],
    )
    table = {(row["window"], row["measure"]): row for row in crossval_rows(cross)}
    assert list(table[("alert", "commit")]) == [
        "window",
        "measure",
        "candidate",
        "active",
    ]  # windows named
    assert table[("long", "commit")]["active"] == "0123456789ab"
    assert table[("alert", "IR vs CSI 300")]["candidate"] == "—"
    assert table[("long", "max ADV part. (%)")]["candidate"] == "4.123 %"
    assert table[("alert", "from")]["active"] == "2024-07-01"
    for shown in (rows[0], *table.values()):
        assert not any(RAW_FLOAT.search(value) for value in shown.values())


def test_nav_markdown_names_the_version_and_rounds() -> None:
    nav = pd.DataFrame(
        {
            "date": pd.to_datetime(["2025-01-02"]),
            "nav": [10_012_345.6789],
            "realized_return": [0.0012345],
            "frictionless_return": [0.0023456],
            "slippage_leakage": [0.0011111],
            "turnover": [0.98765432],
            "costs": [16225.3612],
            "principal_loss": [-0.0012345],
        }
    )
    text = nav_markdown(
        {
            "account": "demo",
            "as_of": "2025-01-02",
            "committed": True,
            "duplicate": False,
            "halted": False,
        },
        nav,
        "v1 daily_momentum",
    )
    assert "Strategy version **v1 daily_momentum**" in text
    assert (
        "| date | NAV (CNY) | realized return (%) | frictionless return (%) | slippage leakage (%) "
        "| turnover (× NAV) | costs (CNY) | principal loss (%) | vs initial capital (%) |"
    ) in text
    # a gain of 0.12 % on the initial capital is no principal loss: 0 %, and +0.12 % beside it
    assert (
        "| 2025-01-02 | 10,012,345.68 | 0.123 % | 0.235 % | 0.111 % | 0.988 | 16,225.36 | "
        "0.00 % | +0.12 % |" in text
    )


def test_nav_rows_show_dates_as_dates_and_a_loss_as_a_loss() -> None:
    nav = pd.DataFrame(
        {"date": pd.to_datetime(["2026-02-10", "2026-02-11"]), "principal_loss": [0.0312, -0.004]}
    )
    rows = nav_rows(nav)
    assert [row["date"] for row in rows] == [
        "2026-02-10",
        "2026-02-11",
    ]  # never 2026-02-10 00:00:00
    assert [(row["principal loss (%)"], row["vs initial capital (%)"]) for row in rows] == [
        ("3.12 %", "-3.12 %"),
        ("0.00 %", "+0.40 %"),
    ]


def test_metric_rows_label_every_metric_with_its_unit() -> None:
    rows = metric_rows(
        {"annualized_return": 0.30104, "information_ratio": 0.5401, "trading_days": 402},
        {"annualized_return": 0.2116},
    )
    assert rows[0] == {
        "metric": "Annualized return (% a year)",
        "portfolio": "30.10 %",
        "CSI 300": "21.16 %",
    }
    assert rows[1]["CSI 300"] == "" and rows[2]["portfolio"] == "402"


@pytest.mark.slow  # the traded account report: ~10 s to build, no other fast test uses it
def test_report_artifacts_link_over_http_or_embed(traded_report: Any) -> None:
    links = ReportLinks("http://127.0.0.1:4201", "secret-0123456789abcdef")
    linked = report_artifacts(traded_report, links)
    folder = traded_report.html.parent.name
    assert linked.tearsheet_url is not None
    assert linked.tearsheet_url.startswith(
        f"http://127.0.0.1:4201/reports/{folder}/tearsheet.html?sig="
    )
    assert linked.image_url.startswith(f"http://127.0.0.1:4201/reports/{folder}/equity.png?sig=")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", linked.markdown)
    assert len(images) == 3 and all(
        url.startswith("http://127.0.0.1:4201/reports/") for url in images
    )
    assert "file://" not in linked.markdown and "v2 daily_momentum" in linked.markdown
    assert "Two alphas" in linked.markdown and "Friction" in linked.markdown
    embedded = report_artifacts(traded_report, None)
    assert embedded.tearsheet_url is None and "file://" not in embedded.markdown
    assert embedded.image_url == data_uri(Path(traded_report.html.parent / "equity.png"))
    assert all(
        url.startswith("data:image/png;base64,")
        for url in re.findall(r"\]\(([^)]+)\)", embedded.markdown)
    )
    assert str(traded_report.html) in embedded.markdown  # says where the tearsheet is


def test_run_tags() -> None:
    assert alert_tag("abc123") == "alert:abc123" and len(alert_tag("x" * 500)) == 100
    assert strategy_tags("daily_momentum", "v2 daily_momentum") == [
        "strategy:daily_momentum",
        "strategy-version:v2",
    ]
    assert strategy_tags("daily_momentum", "0123456789ab") == [
        "strategy:daily_momentum",
        "strategy-version:0123456789ab",
    ]
