"""Repair inputs: a loss alert (or a partial external alert) is completed from the account's
ledger."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from oomrl.diagnostics.autopsy import Autopsy, LossAlert, input_json
from oomrl.market import calendar
from oomrl.portfolio.service import open_ledger
from oomrl.repair.inputs import complete_autopsy
from oomrl.repair.trading import run_rebalance
from oomrl.settings import get_settings
from tests.repair_inputs_for_tests import pending_alert

DATED = LossAlert(alert_id="am-abc-2024-07-12", account="paper", as_of=date(2024, 7, 12))


@pytest.mark.slow
def test_a_dated_alert_is_completed_from_the_ledger(repair_home: Path) -> None:
    settings = get_settings()
    for day in calendar.sessions("2024-07-01", "2024-07-12"):
        run_rebalance(settings, "paper", day.date())
    ledger = open_ledger(settings)
    autopsy = complete_autopsy(DATED, ledger)
    assert isinstance(autopsy, Autopsy) and autopsy.as_of == DATED.as_of
    # What the alert never said
    assert autopsy.alert_id == DATED.alert_id and autopsy.severity == "warning"
    assert autopsy.trigger.rule == "external" and autopsy.trigger.message == "external loss alert"
    assert autopsy.diagnostics.evidence.fills > 0 and autopsy.metrics.turnover_annualized > 50
    assert autopsy.constraints.rebalance == "weekly"


@pytest.mark.slow
def test_a_loss_alert_gets_the_traded_strategy_and_the_last_nav_date(repair_home: Path) -> None:
    settings = get_settings()
    for day in calendar.sessions("2024-07-01", "2024-07-12"):
        run_rebalance(settings, "paper", day.date())
    autopsy = complete_autopsy(LossAlert(alert_id="am-1", account="paper"), open_ledger(settings))
    assert isinstance(autopsy, Autopsy)
    assert autopsy.as_of.isoformat() == "2024-07-12" and autopsy.alert_id == "am-1"
    assert autopsy.diagnostics.module == "strategies.daily_momentum"
    assert autopsy.diagnostics.evidence.fills > 0


def test_full_autopsies_pass_and_accounts_without_history_keep_the_alert(
    repair_home: Path, daily_momentum_autopsy: dict[str, Any]
) -> None:
    ledger = open_ledger(get_settings())
    full = Autopsy.model_validate(daily_momentum_autopsy)
    assert complete_autopsy(full, ledger) is full
    stranger = DATED.model_copy(update={"account": "nobody"})
    # No NAV on that date: the alert as it is, with the module
    kept = complete_autopsy(stranger, ledger)
    assert input_json(kept) == {
        **input_json(stranger),
        "diagnostics": {"module": "strategies.daily_momentum"},
    }
    named = pending_alert("a-2", account="nobody", module="strategies.weekly_liquidity")
    assert complete_autopsy(named, ledger) == named  # the module an alert names is kept
    assert input_json(complete_autopsy(LossAlert(alert_id="a-1", account="nobody"), ledger)) == {
        "alert_id": "a-1",
        "account": "nobody",
        "diagnostics": {"module": "strategies.daily_momentum"},
    }


def test_every_rule_of_the_diagnostics_names_the_metric_the_door_checks() -> None:
    import inspect
    import re

    from oomrl.diagnostics import rules
    from oomrl.diagnostics.autopsy import AutopsyMetrics
    from oomrl.repair.inputs import RULE_METRICS

    raised = set(re.findall(r'(?:_state|_alert)\(\s*"([a-z_]+)"', inspect.getsource(rules)))
    assert raised and raised == set(RULE_METRICS)  # a new rule names the metric it reads
    assert set(RULE_METRICS.values()) <= set(AutopsyMetrics.model_fields)
