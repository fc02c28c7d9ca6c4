"""The repair policy on a real SQLite ledger: inactive versions, cooldown per account and version,
escalation."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.diagnostics.repair_policy import REPAIR_REQUEST, judge, record, sessions_between
from oomrl.portfolio.ledger import Ledger

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ops" / "autopsy.json"
V1, V2 = "a" * 40, "b" * 40


@pytest.fixture()
def ledger(tmp_path: Path) -> Ledger:
    found = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    found.create_schema()
    found.open_account("acc", 1_000_000)
    found.set_active_version("acc", V1, "daily_momentum")
    return found


def alert(alert_id: str, day: date, severity: str = "warning", version: str = V1) -> Autopsy:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    data.update(alert_id=alert_id, account="acc", as_of=day.isoformat(), severity=severity)
    data["diagnostics"]["strategy_version"] = version
    return Autopsy.model_validate(data)


def test_one_request_per_cooldown_per_version_and_severity(ledger: Ledger) -> None:
    first = alert("a1", date(2026, 2, 2))
    assert judge(ledger, first, cooldown=5).requested
    record(ledger, first)
    assert [e["kind"] for e in ledger.events("acc")] == [REPAIR_REQUEST]
    same_day = judge(ledger, alert("a2", date(2026, 2, 2)), cooldown=5)
    assert same_day.verdict == "cooldown" and "a1" in same_day.reason
    # 4 sessions on
    assert judge(ledger, alert("a3", date(2026, 2, 6)), cooldown=5).verdict == "cooldown"
    # 5 sessions on: a new cause
    assert judge(ledger, alert("a4", date(2026, 2, 9)), cooldown=5).requested
    # a critical alert is not held back by a warning's request (the trigger may ignore warnings)
    assert judge(ledger, alert("a5", date(2026, 2, 3), "critical"), cooldown=5).requested
    assert judge(ledger, alert("a6", date(2026, 2, 3)), cooldown=0).requested  # no cooldown at all


def test_alerts_about_a_version_no_longer_active_ask_for_nothing(ledger: Ledger) -> None:
    record(ledger, alert("v1-first", date(2026, 2, 2)))
    ledger.set_active_version("acc", V2, "daily_momentum")  # a repair promoted v2
    # V1's cooldown is v1's
    assert judge(ledger, alert("v2-first", date(2026, 2, 2), version=V2), cooldown=5).requested
    stale = judge(ledger, alert("old", date(2026, 2, 2)), cooldown=5)
    assert stale.verdict == "inactive-version" and V1[:12] in stale.reason
    record(ledger, alert("v2-first", date(2026, 2, 2), version=V2))
    # the cooldown is per version: v2 has its own
    assert (
        judge(ledger, alert("v2-next", date(2026, 2, 3), version=V2), cooldown=5).verdict
        == "cooldown"
    )


def test_sessions_between_counts_xshg_sessions() -> None:
    assert sessions_between(date(2026, 2, 13), date(2026, 2, 24)) == 1  # Spring Festival in between
    assert sessions_between(date(2026, 2, 24), date(2026, 2, 13)) == 1
    assert sessions_between(date(2026, 2, 2), date(2026, 2, 2)) == 0


def test_an_alert_asks_for_no_repair_while_a_challenger_is_on_probation(ledger: Ledger) -> None:
    ledger.open_probation(
        {
            "account": "acc",
            "shadow": "acc~v2",
            "tag": "v2",
            "sha": V2,
            "strategy": "daily_momentum",
            "opened_on": date(2026, 1, 30),
            "sessions": 20,
        },
        100_000_000,
    )
    held = judge(ledger, alert("during", date(2026, 2, 2), "critical"), cooldown=0)
    assert (
        held.verdict == "probation" and "v2 is on probation on acc since 2026-01-30" in held.reason
    )
    ledger.close_probation(1, "retired", date(2026, 2, 3), "a person", "enough", {})
    assert judge(ledger, alert("after", date(2026, 2, 4), "critical"), cooldown=0).requested
