"""The gate's judging checks on recorded runs: outcomes, red tests, behaviour, mutants,
re-checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from guardrails.judging.behaviour_cases import run_cases
    from guardrails.judging.behaviour_check import behaviour_violations, child_spec, load_inputs
    from guardrails.judging.checks import (
        collected_count,
        content_violations,
        in_trees,
        new_test_ids,
        order_violations,
        outcome_violations,
        run_violations,
        superseded_ids,
        superseded_names,
        unchanged_failures,
    )
    from guardrails.judging.gaterun import GateState
    from guardrails.judging.mutant_check import mutation_violations
    from guardrails.judging.recheck import recheck_tests
    from guardrails.judging.redgreen import red_violations
    from guardrails.judging.trivial import trivial_violations

__all__ = [
    "GateState",
    "behaviour_violations",
    "child_spec",
    "collected_count",
    "content_violations",
    "in_trees",
    "load_inputs",
    "mutation_violations",
    "new_test_ids",
    "order_violations",
    "outcome_violations",
    "recheck_tests",
    "red_violations",
    "run_cases",
    "run_violations",
    "superseded_ids",
    "superseded_names",
    "trivial_violations",
    "unchanged_failures",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a name missing there is an error, not Any
    __getattr__ = front_door(__name__, __file__)
