"""prefect.yaml against the flows: entrypoints import, parameters exist, anchors, pool, triggers,
schedules."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
PREFECT_YAML = REPO / "prefect.yaml"
EXPECTED = {
    "daily-chain",
    "ingest-daily",
    "rebalance-weekly",
    "attribution-daily",
    "probation-review",
    "repair",
}
OPERATIONS = REPO / "docs" / "operations.md"


def _config() -> dict[str, Any]:
    return yaml.safe_load(PREFECT_YAML.read_text())


def _deployments() -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in _config()["deployments"]}


def _flow_for(entrypoint: str) -> Any:
    from prefect.flows import load_flow_from_entrypoint

    path, name = entrypoint.rsplit(":", 1)
    return load_flow_from_entrypoint(f"{REPO / path}:{name}")


def test_all_deployments_are_declared() -> None:
    assert set(_deployments()) == EXPECTED


def test_anchors_are_defined_and_used() -> None:
    text = PREFECT_YAML.read_text()
    for anchor in ("local_pool", "common", "after_close", "friday_after_marking", "daily_tags"):
        assert f"&{anchor}" in text and f"*{anchor}" in text, anchor
    assert text.count("<<: *common") == len(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_entrypoint_imports_and_parameters_exist(name: str) -> None:
    deployment = _deployments()[name]
    flow = _flow_for(deployment["entrypoint"])
    accepted = set(inspect.signature(flow.fn).parameters)
    given = set(deployment.get("parameters") or {})
    for trigger in deployment.get("triggers") or []:
        given |= set(trigger.get("parameters") or {})
    assert given <= accepted, f"{name}: {sorted(given - accepted)} not parameters of {flow.name}"
    # Parameters without defaults must be supplied by the deployment or its trigger.
    required = {
        p.name
        for p in inspect.signature(flow.fn).parameters.values()
        if p.default is inspect.Parameter.empty
    }
    if name != "repair":
        assert required <= given, f"{name}: required {sorted(required - given)} not given"
    else:
        assert required <= given | {"autopsy"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pool_version_tags_description(name: str) -> None:
    deployment = _deployments()[name]
    assert deployment["work_pool"]["name"] == "oomrl-local"
    assert deployment["version"] == "{{ git-sha.stdout }}"
    assert "oomrl" in deployment["tags"]
    assert len(deployment["description"]) > 40


def test_version_comes_from_a_git_build_step() -> None:
    """The deployments' version is the flows' version: package version + git SHA, one scheme."""
    import shlex
    import subprocess

    from oomrl.build_info import flow_version

    (step,) = _config()["build"]
    shell = step["prefect.deployments.steps.run_shell_script"]
    assert shell["id"] == "git-sha"
    printed = subprocess.run(
        shlex.split(shell["script"]), cwd=REPO, capture_output=True, text=True, check=True
    )
    assert printed.stdout.strip() == flow_version()


def test_schedules_are_after_the_close_in_shanghai_and_active() -> None:
    from prefect.client.schemas.schedules import construct_schedule

    deployments = _deployments()
    chain = deployments["daily-chain"]["schedules"][0]
    weekly = deployments["rebalance-weekly"]["schedules"][0]
    assert (
        chain["cron"] == "30 16 * * 1-5"
        and chain["timezone"] == "Asia/Shanghai"
        and chain["active"] is True
    )
    # Friday, after the chain has marked the day (both on Shanghai time)
    assert (
        weekly["cron"] == "30 17 * * 5"
        and weekly["timezone"] == "Asia/Shanghai"
        and weekly["active"] is True
    )
    scheduled = {name for name, d in deployments.items() if d.get("schedules")}
    assert scheduled == {
        "daily-chain",
        "rebalance-weekly",
    }  # the chain runs ingest and attribution itself
    for deployment in deployments.values():
        for schedule in deployment.get("schedules") or []:
            construct_schedule(cron=schedule["cron"], timezone=schedule["timezone"])
    assert deployments["ingest-daily"]["concurrency_limit"] == {
        "limit": 1,
        "collision_strategy": "ENQUEUE",
    }
    assert deployments["daily-chain"]["concurrency_limit"] == {
        "limit": 1,
        "collision_strategy": "ENQUEUE",
    }


def _parameter_docs(flow: Any) -> dict[str, str]:
    from prefect.utilities.callables import parameter_schema

    schema = parameter_schema(flow.fn).model_dump()
    return {name: str(spec.get("description") or "") for name, spec in schema["properties"].items()}


# Parameters that carry a unit, and the word of their description that names it.
UNITS = {
    "as_of": "YYYY-MM-DD",
    "start": "YYYY-MM-DD",
    "end": "YYYY-MM-DD",
    "rf": "per year",
    "backoff_seconds": "seconds",
    "batch_symbols": "count",
    "home": "folder",
    "approval_timeout_s": "seconds",
}
FILLED_BY_TRIGGER = {
    "autopsy"
}  # the repair's input comes from its trigger or the webhook, never a guess


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_run_form_field_is_described_with_its_default_and_unit(name: str) -> None:
    """What the UI's run form shows: a description per parameter, a unit where there is one, and no
    required field a person must guess; `home` is explained as internal."""
    deployment = _deployments()[name]
    flow = _flow_for(deployment["entrypoint"])
    docs = _parameter_docs(flow)
    for parameter in inspect.signature(flow.fn).parameters.values():
        described = docs.get(parameter.name, "")
        assert len(described) > 15, f"{name}: parameter {parameter.name} has no description"
        assert parameter.default is not inspect.Parameter.empty or parameter.name in (
            (deployment.get("parameters") or {}).keys() | FILLED_BY_TRIGGER
        )
        if parameter.name in UNITS:
            assert UNITS[parameter.name] in described, (
                f"{name}: {parameter.name} does not name its unit"
            )
    assert "home" not in docs or docs["home"].startswith("Internal:")


def test_the_approval_form_describes_each_field_and_refuses_what_a_mandate_would() -> None:
    from oomrl.diagnostics.mandate import Constraints
    from orchestration.review import MandateReview

    schema = MandateReview.model_json_schema()["properties"]
    assert all(len(spec.get("description", "")) > 15 for spec in schema.values()), schema
    for field in ("max_adv_participation", "max_weekly_turnover"):
        bounds = {
            k: v
            for k, v in Constraints.model_json_schema()["properties"][field]["anyOf"][0].items()
            if k in ("exclusiveMinimum", "maximum")
        }
        assert bounds and bounds.items() <= schema[field]["anyOf"][0].items(), (field, bounds)


def test_the_docs_state_the_repair_trigger_as_deployed() -> None:
    """docs/operations.md quotes the trigger's severity floor and policy label exactly as
    prefect.yaml sets them."""
    trigger, _ = _deployments()["repair"]["triggers"]
    severities = trigger["match"]["oomrl.alert.severity"]
    assert severities == ["warning", "critical"]
    text = OPERATIONS.read_text()
    assert f"oomrl.alert.severity: [{', '.join(severities)}]" in text
    assert f"oomrl.repair: {trigger['match']['oomrl.repair']}" in text


def test_repair_is_triggered_by_loss_alerts_and_has_no_concurrency_lease() -> None:
    from prefect.events.schemas.deployment_triggers import DeploymentTriggerTypes
    from pydantic import TypeAdapter

    repair = _deployments()["repair"]
    # A deployment concurrency lease is revoked while a run waits for approval (the run then
    # crashes); one repair per account is held in the ledger instead (oomrl.repair.claims).
    assert "concurrency_limit" not in repair
    assert repair["parameters"]["auto_approve"] is False
    trigger, forward = [
        TypeAdapter(DeploymentTriggerTypes).validate_python(t) for t in repair["triggers"]
    ]
    # a retired challenger's forward autopsy starts the account's next repair; a retirement without
    # one does not
    assert forward.expect == {"oomrl.strategy.retired"}
    assert forward.parameters == {"autopsy": "{{ event.payload.autopsy }}"}
    from oomrl.events import FORWARD_AUTOPSY_LABEL, account_resource

    assert forward.match.matches({**account_resource("paper"), FORWARD_AUTOPSY_LABEL: "yes"})
    assert not forward.match.matches({**account_resource("paper"), FORWARD_AUTOPSY_LABEL: "no"})
    assert trigger.expect == {"oomrl.loss.alert"}
    assert trigger.parameters == {"autopsy": "{{ event.payload }}"}
    assert trigger.match.model_dump()["prefect.resource.id"] == "oomrl.account.*"
    from oomrl.diagnostics.repair_policy import REPAIR_LABEL, SEVERITY_LABEL, alert_resource

    # what the diagnostics emit is what the trigger matches
    assert trigger.match.matches(alert_resource("paper", "warning", "requested"))
    assert trigger.match.matches(alert_resource("paper", "critical", "requested"))
    assert not trigger.match.matches(alert_resource("paper", "critical", "cooldown"))
    assert not trigger.match.matches(alert_resource("paper", "warning", "inactive-version"))
    assert not trigger.match.matches(alert_resource("paper", "critical", "probation"))
    assert {SEVERITY_LABEL, REPAIR_LABEL} <= set(trigger.match.model_dump())
    # the webhook's event mode labels what it emits the same way, a minimal alert as a warning
    from oomrl.diagnostics.autopsy import LossAlert
    from oomrl.webhook.launch import alert_event_resource
    from tests.repair_inputs_for_tests import full_autopsy

    assert trigger.match.matches(alert_event_resource(LossAlert(alert_id="ops-1", account="paper")))
    critical = alert_event_resource(full_autopsy(account="paper", severity="critical"))
    assert trigger.match.matches(critical) and critical[SEVERITY_LABEL] == "critical"
    # an event without the labels starts nothing: every emitter of oomrl.loss.alert must use
    # alert_resource()
    assert not trigger.match.matches(
        {"prefect.resource.id": "oomrl.account.paper", "prefect.resource.name": "paper"}
    )
