"""What a repair shows a person: a review form whose every field is described with its unit and
keeps its bounds, metrics rounded with units, and the promotion evidence (table, decision, chart),
also when cross-validation could not measure anything."""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest

from oomrl.agent.roles import Mandate
from oomrl.diagnostics.mandate import Constraints
from oomrl.repair.artifacts import mandate_markdown, rounded_text
from oomrl.repair.crossval import Check, CrossValidation, VersionMeasures
from oomrl.repair.loop import RepairOutcome
from orchestration.review import MandateReview, review_form
from tests.repair_inputs_for_tests import autopsy_json, full_autopsy

RAW_FLOAT = re.compile(r"\d\.\d{6,}")  # what the form showed before: -0.001119942000000096
MANDATE = Mandate(
    module="strategies.daily_momentum",
    text="Enforce volume limits and reduce turnover",
    constraints=Constraints(
        rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.3
    ),
    rationale="offline rules: alert type 'friction'; "
    'metrics {"daily_pnl": -0.001119942000000096}',
)
AUTOPSY = full_autopsy(
    as_of="2024-07-12",
    severity="warning",
    trigger={
        **autopsy_json()["trigger"],
        "rule": "execution_decay",
        "message": "slippage leakage 0.020212345 of NAV over 20 sessions",
    },
    metrics={
        "daily_pnl": -0.001119942000000096,
        "slippage_leakage": 0.0202123,
        "drawdown": -0.0256789,
        "cumulative_principal_loss": -0.004,
        "turnover_annualized": 276.3912,
        "rolling_ir_60d": None,
    },
)


def test_every_field_of_the_prefilled_form_is_titled_described_and_bounded() -> None:
    form = review_form(MANDATE, AUTOPSY, 3600)
    schema = form.model_json_schema()
    for name, field in schema["properties"].items():
        # What the UI shows above and under
        assert field.get("title") and field.get("description"), name
    assert schema["properties"]["max_adv_participation"]["default"] == 0.05  # prefilled ...
    assert "fraction of ADV" in schema["properties"]["max_adv_participation"]["title"]
    with pytest.raises(pydantic.ValidationError):  # ... and still bounded like the mandate
        form(decision="edit", max_adv_participation=1.5)
    # Prefect's own with_initial_data drops both (what the UI showed before): the reason for
    # prefilled()
    plain = MandateReview.with_initial_data(
        text="x", max_adv_participation=0.05
    ).model_json_schema()
    assert "description" not in plain["properties"]["max_adv_participation"]


def test_the_form_shows_the_superseded_tests_and_lets_a_reviewer_edit_them() -> None:
    node_id = "tests/strategies/test_daily_momentum.py::test_trades_every_new_session"
    proposed = MANDATE.model_copy(update={"supersedes": [node_id]})
    assert f"- `{node_id}`" in mandate_markdown(proposed, AUTOPSY, 3600)
    assert "Supersedes no old test" in mandate_markdown(MANDATE, AUTOPSY, 3600)
    form = review_form(proposed, AUTOPSY, 3600)
    field = form.model_json_schema()["properties"]["supersedes"]
    assert field["default"] == [node_id] and "node id" in field["title"]
    kept = form(decision="edit").to_decision(proposed).mandate  # untouched: the proposal's list
    assert kept is not None and kept.supersedes == [node_id]
    emptied = form(decision="edit", supersedes=[]).to_decision(proposed).mandate
    assert emptied is not None and emptied.supersedes == []
    with pytest.raises(pydantic.ValidationError):  # a node id, as the gate takes it
        form(decision="edit", supersedes=["tests/strategies/test_daily_momentum.py"])


def test_the_form_text_rounds_every_number_and_names_its_unit() -> None:
    text = mandate_markdown(MANDATE, AUTOPSY, 3600)
    assert not RAW_FLOAT.search(text), text
    for shown in (
        "| rebalance | weekly |",
        "| max ADV participation | 5.0 % of ADV |",
        "| max weekly turnover | 30.0 % of NAV |",
        "| daily P&L | -0.11 % of NAV |",
        "| turnover | 276.4× NAV a year |",
        "| principal loss | 0.00 % of initial capital |",
        "| rolling 60-day IR | — |",
        "no answer within 3,600 s (1 h) rejects",
        "### The alert: execution_decay (warning) on 2024-07-12",
        "slippage leakage 0.02021 of NAV",
    ):
        assert shown in text, shown
    assert rounded_text("x 0.020212345 y -1.5e-07 z 3.25") == "x 0.02021 y -1.5e-07 z 3.25"


def _cross(passed: bool) -> CrossValidation:
    days = [date(2024, 1, 2) + timedelta(days=i) for i in range(90)]
    rng = np.random.default_rng(2)
    rows = [
        VersionMeasures(
            version=version,
            sha=f"{version}-0123456789",
            trading_days=len(days),
            rebalances=12,
            max_rebalances_per_period=1,
            max_adv_participation=0.0412345,
            max_weekly_turnover=0.29,
            turnover=3.123456,
            costs_fraction=0.00412345,
            net_return=0.0123456,
            information_ratio=0.345678,
            max_drawdown=-0.0512345,
            window=window,
            dates=days,
            returns=list(rng.normal(0.0005, 0.01, len(days))),
        )
        for window in ("alert", "long")
        for version in ("candidate", "active")
    ]
    return CrossValidation(
        start=days[30],
        end=days[-1],
        rows=rows,
        long_start=days[0],
        checks=[Check(name="rebalance", passed=passed, detail="at most 1 rebalance(s) a week")],
    )


@pytest.mark.slow  # a Prefect test server
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("measured", [True, False])
def test_every_ending_at_cross_validation_publishes_its_table(
    tmp_path: Path, measured: bool
) -> None:
    from prefect import flow

    from tasks.repair import publish_evidence
    from tests.flows.prefect_helpers import read_artifact

    run_dir = tmp_path / "runs" / "repair-20241201T000000Z-abcdef"
    run_dir.mkdir(parents=True)
    outcome = RepairOutcome(
        status="failed",
        step="cross-validation",
        run_dir=str(run_dir),
        reason="candidate: no session to measure in the alert window",
        cross_validation=_cross(False) if measured else None,
    )

    @flow(name="publish-evidence")
    def publish() -> None:
        publish_evidence(outcome)

    publish()
    table: list[dict[str, Any]] = read_artifact("repair-cross-validation")
    if not measured:  # the docs promise the artifact on every "Cross-validation failed"
        assert table == [
            {"measure": "result", "value": "not measured"},
            {"measure": "reason", "value": outcome.reason},
        ]
        return
    assert [(row["window"], row["measure"]) for row in table][:4] == [
        ("alert", "commit"),
        ("alert", "from"),
        ("alert", "to"),
        ("alert", "sessions"),
    ]
    assert {row["window"] for row in table} == {"alert", "long"} and list(table[0])[2:] == [
        "candidate",
        "active",
    ]
    assert not any(RAW_FLOAT.search(str(v)) for r in table for v in r.values())
    chart = run_dir.parent / f"report-{run_dir.name}" / "evidence.png"
    assert chart.stat().st_size > 10_000
    # No stack: embedded
    assert str(read_artifact("repair-evidence")).startswith("data:image/png;base64,")
    decision = str(read_artifact("repair-cross-validation-decision"))
    assert decision.startswith("# Cross-validation: REFUSE") and "![Cumulative return" in decision
