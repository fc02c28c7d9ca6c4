"""The `cycle` flow on the real sample: one session of the loop, idempotent on a retry or a re-run."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest


@pytest.mark.usefixtures("prefect_harness")
def test_cycle_books_a_session_once_and_diagnoses(oomrl_home: Path) -> None:
    from flows.cycle import cycle
    from oomrl.config import get_settings
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.service import open_ledger

    ensure_sample(get_settings())
    # Without a server holding the `repair` deployment, the alert is repaired here, as a subflow.
    first = cycle(account="cyc", as_of=date(2024, 7, 5), ingest=False, repair_mode="auto",
                  auto_approve=True, provider="offline")
    assert first["ingest"] == {"skipped": "ingest=False"}
    assert first["rebalance"]["committed"] is True and first["rebalance"]["as_of"] == "2024-07-05"
    assert first["attribution"] == {"skipped": "fewer than 3 booked sessions"}
    assert [a["rule"] for a in first["diagnostics"]] == ["turnover_spike"]
    assert first["repair"]["route"] == "inline"
    assert first["repair"]["alert_id"] == first["diagnostics"][0]["alert_id"]
    # The autopsy names the strategy the account trades, so the offline repair promotes a weekly v2.
    assert first["repair"]["status"] == "promoted" and Path(first["repair"]["run_dir"]).exists()
    again = cycle(account="cyc", as_of=date(2024, 7, 5), ingest=False, repair_mode="off")
    assert again["rebalance"] == {"skipped": "not due for the active strategy, or already booked"}
    cycle(account="cyc", as_of=date(2024, 7, 8), ingest=False, repair_mode="off")  # a new week: due
    not_due = cycle(account="cyc", as_of=date(2024, 7, 9), ingest=False, repair_mode="off")
    assert not_due["rebalance"] == {"skipped": "not due for the active strategy, or already booked"}
    third = cycle(account="cyc", as_of=date(2024, 7, 15), ingest=False, repair_mode="off")
    assert third["rebalance"]["committed"] is True
    assert third["attribution"]["html"].endswith("tearsheet.html")
    holiday = cycle(account="cyc", as_of=date(2024, 10, 1), ingest=False, repair_mode="off")
    assert "not an XSHG session" in holiday["rebalance"]["skipped"]
    fills = open_ledger(get_settings()).fills_frame("cyc")
    assert len(fills) > 0 and set(fills["date"].astype(str)) == {"2024-07-05", "2024-07-08", "2024-07-15"}


@pytest.mark.usefixtures("prefect_harness")
def test_repair_route() -> None:
    from tasks.cycle import repair_route

    assert repair_route.fn("inline") == "inline" and repair_route.fn("off") == "off"
    assert repair_route.fn("auto") == "inline"  # the harness has no `repair` deployment
    with pytest.raises(ValueError, match="repair_mode"):
        repair_route.fn("sometimes")
