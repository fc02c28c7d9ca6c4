"""Every flow in flows/ declares retries (or why it has none) and a version and publishes at least
one artifact."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FLOW_MODULES = sorted(p.stem for p in (REPO / "flows").glob("*.py") if p.stem != "__init__")


def _artifact_calls(path: Path) -> set[str]:
    """Names of create_*_artifact functions called in a module."""
    calls = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            if name.startswith("create_") and name.endswith("_artifact"):
                calls.add(name)
    return calls


def _imported_task_modules(path: Path) -> list[Path]:
    """tasks/*.py modules the flow module imports from (artifacts may be published there)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tasks."):
            candidate = REPO / Path(*node.module.split(".")).with_suffix(".py")
            if candidate.exists():
                found.append(candidate)
    return found


# The loop's flows never retry as a whole: a Prefect flow retry repeats any failure, bad data and
# refusals included; their tasks retry what is transient (tasks/retry.py, network_error_only).
TASK_RETRIES_ONLY = {
    "daily-chain",
    "ingest-market-data",
    "weekly-rebalance",
    "attribution",
    "loss-diagnostics",
}


def test_there_are_flows() -> None:
    assert {"grid", "ingest"} <= set(FLOW_MODULES)


@pytest.mark.parametrize("module_name", FLOW_MODULES)
def test_flow_declares_retries_version_and_artifacts(module_name: str) -> None:
    from prefect.flows import Flow

    module = importlib.import_module(f"flows.{module_name}")
    flows = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, Flow) and obj.fn.__module__ == module.__name__
    ]
    assert flows, f"flows/{module_name}.py defines no @flow"
    for flow in flows:
        if flow.name in TASK_RETRIES_ONLY:
            assert flow.retries == 0, f"{flow.name} would retry a deterministic failure"
        else:
            # A flow without retries says why (NO_FLOW_RETRIES): a Failed state it returns on
            # purpose would otherwise be run again, and Prefect has no retry condition for flows.
            why = getattr(module, "NO_FLOW_RETRIES", "")
            assert isinstance(flow.retries, int) and (flow.retries >= 1 or len(why) > 20), (
                f"{flow.name}: retries={flow.retries}"
            )
        assert flow.version, f"{flow.name} declares no version"
    path = REPO / "flows" / f"{module_name}.py"
    published = _artifact_calls(path).union(
        *(_artifact_calls(p) for p in _imported_task_modules(path))
    )
    assert published, f"flows/{module_name}.py (and its tasks) publish no artifact"
