"""oomrl/events.py is the contract prefect.yaml uses: the trigger's event and resource, the repair
deployment."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from oomrl import events

PREFECT_YAML = Path(__file__).resolve().parent.parent / "prefect.yaml"


def test_the_repair_trigger_and_deployment_are_the_ones_events_names() -> None:
    deployments = {d["name"]: d for d in yaml.safe_load(PREFECT_YAML.read_text())["deployments"]}
    flow_name, deployment = events.REPAIR_DEPLOYMENT.split("/")
    repair = deployments[deployment]
    path, _, function = repair["entrypoint"].partition(":")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    assert getattr(module, function).name == flow_name
    trigger, forward = repair["triggers"]  # a loss alert; a retired challenger's forward autopsy
    assert trigger["expect"] == [events.LOSS_ALERT_EVENT]
    assert (
        forward["expect"] == [events.RETIRED_EVENT]
        and events.FORWARD_AUTOPSY_LABEL in forward["match"]
    )
    for match in (trigger["match"], forward["match"]):
        pattern = match["prefect.resource.id"]
        assert pattern.endswith("*") and events.account_resource("a1")[
            "prefect.resource.id"
        ].startswith(pattern[:-1])


def test_an_alert_is_one_event_id_wherever_it_is_emitted() -> None:
    assert events.event_id("alert-1") == events.event_id("alert-1") != events.event_id("alert-2")
    # Pinned: a changed namespace would give a re-sent alert a new id, and a second repair.
    assert str(events.event_id("alert-1")) == "cf38208a-8e87-554b-ac28-5a15bc102371"
