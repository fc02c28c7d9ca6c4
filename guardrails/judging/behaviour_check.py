"""Behaviour judged outside pytest: held-out inputs through the production calling convention.

The inputs live in the held-out folder (`<holdout>/<inputs>`, a JSON object with a `cases` list).
So the agent never sees them. The cases run in a fresh strategy host. The gate is the caller,
exactly as production calls S. S never shares a process with pytest. So there is no second "under
pytest" run to compare. The trusted parent compares the outputs with the expected values when a
case has them. Those are never shown to the candidate. It also checks the declared properties.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from guardrails.errors import GateSetupError
from guardrails.verdict import Violation
from guardrails.workspace import BehaviourContract

TOLERANCE = 1e-9


def load_inputs(contract: BehaviourContract | None, holdout: Path | None) -> dict[str, Any] | None:
    """The behaviour spec (cases with their expectations) or None when nothing is declared."""
    if holdout is None:
        return None
    if contract is None:
        if (holdout / "behaviour.json").exists():
            raise GateSetupError(
                f"{holdout / 'behaviour.json'} exists but the workspace has no "
                "[tool.oomrl.guard.behaviour] table saying how to call it"
            )
        return None
    path = holdout / contract.inputs
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        cases = document["cases"]
        assert (
            isinstance(cases, list)
            and cases
            and all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in cases)
        )
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise GateSetupError(
            f"behaviour inputs {path}: need a JSON object with a non-empty "
            f"'cases' list of objects with an 'id' ({exc})"
        ) from None
    return {
        "convention": contract.convention,
        "entry": contract.entry,
        "repeat": 2 if "deterministic" in contract.properties else 1,
        "cases": cases,
        "properties": list(contract.properties),
    }


def child_spec(inputs: dict[str, Any]) -> dict[str, Any]:
    """What the host is asked: the calls, never the expected values."""
    cases = [{k: v for k, v in case.items() if k != "expect"} for case in inputs["cases"]]
    return {
        "convention": inputs["convention"],
        "entry": inputs["entry"],
        "repeat": inputs["repeat"],
        "cases": cases,
    }


def same(a: Any, b: Any, tolerance: float = 1e-12) -> bool:
    """Equal JSON values, numbers within a relative tolerance (bools and ints exactly)."""
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, tolerance) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _symbols(case: dict[str, Any]) -> set[str] | None:
    if "panels" in case:
        return set(case["panels"].get("close", {}).get("columns", []))
    for value in [*case.get("args", []), *case.get("kwargs", {}).values()]:
        if isinstance(value, dict):
            return set(value)
    return None


def _property_problems(
    case: dict[str, Any], calls: list[dict[str, Any]], properties: list[str]
) -> list[str]:
    first = calls[0]
    problems = []
    if "deterministic" in properties and not all(same(c, first) for c in calls[1:]):
        problems.append("deterministic: a second identical call returned something else")
    if not first.get("ok") or "rebalance" in case:
        return problems
    value = first.get("value")
    if "weights" in properties:
        # exact types: a bool is no weight, a non-finite float arrives as text ("nan")
        numbers = list(value.values()) if type(value) is dict else None
        if (
            numbers is None
            or not all(
                type(w) in (int, float) and math.isfinite(w) and w >= -TOLERANCE for w in numbers
            )
            or sum(numbers) > 1 + TOLERANCE
        ):
            problems.append("weights: not a mapping of finite weights >= 0 summing to <= 1")
    symbols = _symbols(case)
    if (
        "known_symbols" in properties
        and isinstance(value, dict)
        and symbols is not None
        and not set(value) <= symbols
    ):
        problems.append("known_symbols: weights for symbols the input does not have")
    return problems


def behaviour_violations(inputs: dict[str, Any], plain: Any) -> list[Violation]:
    """The production run's outputs against the expectations and the declared properties."""
    if not isinstance(plain, list):
        return [
            Violation(
                rule="behaviour.incomplete",
                message=(
                    "the production run of the behaviour cases wrote no outputs (its host failed)"
                ),
            )
        ]
    by_id = {o.get("id"): o.get("calls") for o in plain if isinstance(o, dict)}
    found: list[Violation] = []
    for case in inputs["cases"]:
        cid = case["id"]
        calls = by_id.get(cid)
        if not (isinstance(calls, list) and calls):
            found.append(
                Violation(
                    rule="behaviour.incomplete", message=(f"behaviour case {cid} has no output")
                )
            )
            continue
        if "expect" in case and not (
            calls[0].get("ok") and same(calls[0].get("value"), case["expect"], TOLERANCE)
        ):
            found.append(
                Violation(
                    rule="behaviour.unexpected",
                    message=(f"held-out behaviour case {cid} did not return the expected value"),
                )
            )
        found += [
            Violation(rule="behaviour.property", message=f"behaviour case {cid}: {text}")
            for text in _property_problems(case, calls, inputs["properties"])
        ]
    return found
