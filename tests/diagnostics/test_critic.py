"""The critic's root cause follows the ledger evidence; autopsies validate against the committed
schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from oomrl.diagnostics.autopsy import SCHEMA_PATH, Autopsy, autopsy_schema, write_schema
from oomrl.diagnostics.critic import autopsy_for
from oomrl.diagnostics.rules import AlertConfig, evaluate
from oomrl.errors import DataValidationError
from tests.diagnostics.conftest import fills_frame, nav_frame, quiet_returns

CONFIG = AlertConfig()


def _autopsy(
    nav: pd.DataFrame,
    fills: pd.DataFrame,
    rule: str,
    benchmark: pd.Series | None = None,
    fallback: str | None = None,
) -> Autopsy:
    alerts = {
        a.rule: a for a in evaluate(nav, fills, CONFIG, nav["date"].iloc[-1], "acct", benchmark)
    }
    return autopsy_for(
        alerts[rule],
        nav,
        fills,
        CONFIG,
        module="strategies.daily_momentum",
        fallback_version=fallback,
        execution_log="runs/x/fills.csv",
        benchmark=benchmark,
    )


def test_committed_schema_equals_the_model() -> None:
    assert json.loads(SCHEMA_PATH.read_text()) == autopsy_schema()


def test_aggressive_crossing_when_fills_exceed_the_participation_cap() -> None:
    nav = nav_frame(list(quiet_returns(30)) + [-0.035], leakage=0.0008, turnover=0.4)
    fills = fills_frame(nav["date"].iloc[-10:], participation=0.12, impact=5000.0)
    autopsy = _autopsy(nav, fills, "daily_loss")
    assert autopsy.diagnostics.root_cause.startswith(
        "Aggressive crossing exceeding order book depth: 10 fill(s)"
    )
    assert autopsy.mandate == "Enforce volume limits and reduce turnover frequency"
    assert autopsy.constraints.model_dump(exclude_none=True) == {
        "rebalance": "weekly",
        "max_adv_participation": 0.05,
        "max_weekly_turnover": 0.30,
    }
    ev = autopsy.diagnostics.evidence
    assert ev.fills == 10 and ev.adv_participation_max == pytest.approx(0.12)
    assert ev.costs.impact_cost == pytest.approx(50_000.0)
    assert ev.costs.total == pytest.approx(10 * (100 + 15 + 5000))
    assert ev.traded_value == pytest.approx(10 * 1000 * 1500.0)
    assert autopsy.metrics.slippage_leakage == pytest.approx(20 * 0.0008)
    assert autopsy.metrics.turnover_annualized == pytest.approx(0.4 * 252)
    # The version live on the loss date
    assert autopsy.diagnostics.strategy_version == "a1b2c3d4e5f6"
    jsonschema.validate(autopsy.model_dump(mode="json"), json.loads(SCHEMA_PATH.read_text()))


def test_over_trading_when_turnover_is_high_but_fills_are_small() -> None:
    nav = nav_frame(quiet_returns(40), turnover=0.3)
    fills = fills_frame(nav["date"].iloc[-5:], participation=0.01)
    autopsy = _autopsy(nav, fills, "turnover_spike")
    assert autopsy.diagnostics.root_cause.startswith("Over-trading: turnover 75.6× a year")
    assert autopsy.constraints.rebalance == "weekly"


def test_position_losses_when_execution_is_clean() -> None:
    nav = nav_frame([0.01] * 10 + [-0.012] * 10, version="")
    fills = fills_frame(nav["date"].iloc[-2:], participation=0.01, impact=1.0, commission=5.0)
    autopsy = _autopsy(nav, fills, "drawdown", fallback="feedbeef")
    assert autopsy.diagnostics.root_cause.startswith("Position losses, not execution")
    assert (
        autopsy.constraints.max_position_weight == 0.05 and autopsy.constraints.max_drawdown == 0.10
    )
    # NAV carries none: the active version
    assert autopsy.diagnostics.strategy_version == "feedbeef"
    assert autopsy.metrics.drawdown < -0.10 and autopsy.event == "FINANCIAL_DEGRADATION_DETECTED"
    assert autopsy.diagnostics.evidence.window_start == nav["date"].iloc[0].date()


def test_signal_decay_on_ir_with_clean_execution() -> None:
    rng = np.random.default_rng(9)
    bench_values = rng.normal(0.002, 0.01, 80)
    nav = nav_frame(bench_values - 0.003 + rng.normal(0, 0.001, 80))
    bench = pd.Series(bench_values, index=nav["date"])
    autopsy = _autopsy(nav, fills_frame([]), "ir_decay", bench)
    assert autopsy.diagnostics.root_cause.startswith("Signal decay: rolling IR")
    assert autopsy.constraints.min_information_ratio == 0.0
    assert autopsy.metrics.rolling_ir_60d is not None and autopsy.metrics.rolling_ir_60d < -1
    assert autopsy.diagnostics.evidence.impact_share_of_costs is None
    assert autopsy.diagnostics.evidence.adv_participation_max is None


def test_the_paper_example_shape_is_a_subset() -> None:
    nav = nav_frame(list(quiet_returns(30)) + [-0.035])
    autopsy = _autopsy(nav, fills_frame(nav["date"].iloc[-3:]), "daily_loss")
    dumped = autopsy.model_dump(mode="json")
    assert {
        "event",
        "alert_id",
        "account",
        "as_of",
        "severity",
        "metrics",
        "diagnostics",
        "mandate",
        "constraints",
    } <= set(dumped)
    assert {
        "daily_pnl",
        "slippage_leakage",
        "drawdown",
        "cumulative_principal_loss",
        "turnover_annualized",
        "rolling_ir_60d",
    } == set(dumped["metrics"])
    assert {"module", "strategy_version", "root_cause", "execution_log"} <= set(
        dumped["diagnostics"]
    )
    assert dumped["as_of"] == nav["date"].iloc[-1].date().isoformat()
    assert dumped["diagnostics"]["module"] == "strategies.daily_momentum"


def test_schema_rejects_a_broken_autopsy() -> None:
    nav = nav_frame(list(quiet_returns(30)) + [-0.035])
    good = _autopsy(nav, fills_frame(nav["date"].iloc[-3:]), "daily_loss").model_dump(mode="json")
    schema = json.loads(SCHEMA_PATH.read_text())
    for broken in (
        {**good, "severity": "meh"},
        {**good, "constraints": {**good["constraints"], "max_adv_participation": 2}},
        {k: v for k, v in good.items() if k != "mandate"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


def test_fills_without_cost_columns_are_rejected() -> None:
    nav = nav_frame(list(quiet_returns(30)) + [-0.035])
    with pytest.raises(DataValidationError, match="fills frame lacks column"):
        _autopsy(nav, pd.DataFrame({"date": nav["date"]}), "daily_loss")


def test_write_schema_writes_the_model_schema(tmp_path: Path) -> None:
    path = write_schema(tmp_path / "autopsy.schema.json")
    assert json.loads(path.read_text()) == autopsy_schema()
