"""Repair inputs: a loss alert (or a partial external alert) is completed from the account's ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.market import calendar
from oomrl.portfolio.service import open_ledger, run_rebalance
from oomrl.repair_inputs import complete_autopsy
from oomrl.settings import get_settings

PARTIAL = {"alert_id": "am-abc-2024-07-12", "account": "paper", "as_of": "2024-07-12",
           "severity": "critical", "rule": "HighSlippage", "mandate": "Stop crossing the spread",
           "diagnostics": {"module": "strategies.daily_momentum", "root_cause": "slippage alarm"},
           "source": "alertmanager"}


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_loss_alert_gets_the_traded_strategy_and_the_last_nav_date(repair_home: Path) -> None:
    settings = get_settings()
    for day in calendar.sessions("2024-07-01", "2024-07-12"):
        run_rebalance(settings, "paper", day.date())
    autopsy = Autopsy.model_validate(complete_autopsy({"alert_id": "am-1", "account": "paper"},
                                                      open_ledger(settings)))
    assert autopsy.as_of.isoformat() == "2024-07-12" and autopsy.alert_id == "am-1"
    assert autopsy.diagnostics.module == "strategies.daily_momentum"
    assert autopsy.diagnostics.evidence.fills > 0


def test_full_autopsies_pass_and_accounts_without_history_keep_the_alert(
        repair_home: Path, daily_momentum_autopsy: dict[str, Any]) -> None:
    ledger = open_ledger(get_settings())
    assert complete_autopsy(daily_momentum_autopsy, ledger) is daily_momentum_autopsy
    stranger = {**PARTIAL, "account": "nobody", "severity": "loud"}
    assert complete_autopsy(stranger, ledger) == stranger  # no NAV on that date: the alert as it is
    assert complete_autopsy({"alert_id": "a-1", "account": "nobody"}, ledger) == {
        "alert_id": "a-1", "account": "nobody", "diagnostics": {"module": "strategies.daily_momentum"}}


def test_every_rule_of_the_diagnostics_names_the_metric_the_door_checks() -> None:
    import inspect
    import re

    from oomrl.diagnostics import rules
    from oomrl.diagnostics.autopsy import AutopsyMetrics
    from oomrl.repair_inputs import RULE_METRICS

    raised = set(re.findall(r'(?:_state|_alert)\(\s*"([a-z_]+)"', inspect.getsource(rules)))
    assert raised and raised == set(RULE_METRICS)  # a new rule names the metric it reads
    assert set(RULE_METRICS.values()) <= set(AutopsyMetrics.model_fields)
