"""Autopsies as repair input: a partial external alert is completed from the account's ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomrl.config import get_settings
from oomrl.diagnostics.autopsy import Autopsy
from oomrl.market import calendar
from oomrl.portfolio.service import open_ledger, run_rebalance
from oomrl.repair_inputs import complete_autopsy

PARTIAL = {"alert_id": "am-abc-2024-07-12", "account": "paper", "as_of": "2024-07-12",
           "severity": "critical", "rule": "HighSlippage", "mandate": "Stop crossing the spread",
           "diagnostics": {"module": "strategies.daily_momentum", "root_cause": "slippage alarm"},
           "source": "alertmanager"}


def test_a_partial_alert_is_completed_from_the_ledger(repair_home: Path) -> None:
    settings = get_settings()
    for day in calendar.sessions("2024-07-01", "2024-07-12"):
        run_rebalance(settings, "paper", day.date())
    ledger = open_ledger(settings)
    full = complete_autopsy(dict(PARTIAL), ledger)
    autopsy = Autopsy.model_validate(full)
    assert autopsy.alert_id == PARTIAL["alert_id"] and autopsy.severity == "critical"
    assert autopsy.trigger.rule == "HighSlippage" and autopsy.mandate == "Stop crossing the spread"
    assert autopsy.diagnostics.evidence.fills > 0 and autopsy.metrics.turnover_annualized > 50
    assert autopsy.constraints.rebalance == "weekly"


def test_full_autopsies_and_accounts_without_history_are_left_as_they_are(
        repair_home: Path, daily_momentum_autopsy: dict[str, Any]) -> None:
    ledger = open_ledger(get_settings())
    assert complete_autopsy(daily_momentum_autopsy, ledger) is daily_momentum_autopsy
    stranger = {**PARTIAL, "account": "nobody", "severity": "loud"}
    assert complete_autopsy(stranger, ledger) is stranger
    undated = {k: v for k, v in PARTIAL.items() if k != "as_of"}
    assert complete_autopsy(undated, ledger) is undated
