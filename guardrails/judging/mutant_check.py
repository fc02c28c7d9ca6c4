"""Mutation check for green test-gen: the new tests must kill simple mutants of the code they run.

Each mutant is a copy of the workspace: hard links, the mutated file rewritten. It is bound at the
same /workspace path as the original run, in a fresh sandbox. It runs the same whole suite in the
same order. Nothing in the run tells it from the original. A mutant counts as killed only when one
of the new tests fails. The test must have passed on the original. It must fail by an assertion,
or by an exception raised from S's code. The host reports such an exception; its client raises it.
An exception of the test's own code does not count.
"""

from __future__ import annotations

import math
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from guardrails.judging import mutate as mutation
from guardrails.judging.gaterun import GateState
from guardrails.sandbox import CoverageReader, SuiteRequest, SuiteResult, make_readable, run_suite
from guardrails.verdict import Violation

MUTANT_TIME_LIMIT_S = 60.0
PARALLEL = 2


def _link_copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target, copy_function=os.link, symlinks=True)


def variant_workspace(gate: GateState, name: str, texts: dict[str, str]) -> Path:
    """A hard-linked copy of the workspace with the files of `texts` rewritten."""
    copy = gate.dirs.root / "mutants" / name
    _link_copy(gate.dirs.ws, copy)
    for rel, text in texts.items():
        target = copy / rel
        target.unlink()  # a new file: the hard link to the original stays untouched
        target.write_text(text, encoding="utf-8")
    make_readable(copy)
    return copy


def killed(suite: SuiteResult, new_ids: list[str], original: SuiteResult) -> bool:
    """A new test that passed on the original fails here, and the failure is S's.

    It fails by an assertion or by an exception S raised. Then the mutant broke S. An error in the
    test's own code kills nothing.
    """
    return any(
        original.outcome(n) == "passed"
        and suite.outcome(n) == "failed"
        and (
            suite.outcomes.get(n, {}).get("assertion")
            or suite.outcomes.get(n, {}).get("source_raised")
        )
        for n in new_ids
    )


def mutation_violations(
    gate: GateState, reader: CoverageReader, new_ids: list[str]
) -> list[Violation]:
    """Run the whole suite against simple mutants of the source lines the new tests execute."""
    contract, ws = gate.contract, gate.dirs.ws
    assert gate.first is not None
    mutants: list[tuple[str, mutation.Mutant]] = []
    exercised = False
    for tree in contract.source:
        for path in sorted((ws / tree).rglob("*.py")):
            lines = reader.lines_run_by(path, set(new_ids))
            exercised = exercised or bool(lines)
            room = contract.mutation_max - len(mutants)
            if lines and room > 0:
                rel = path.relative_to(ws).as_posix()
                text = path.read_text(encoding="utf-8")
                mutants += [(rel, m) for m in mutation.generate_mutants(text, lines, room)]
    if not exercised:
        return [
            Violation(
                rule="mutation.nothing_exercised",
                message=(
                    "the new tests execute no line of the source trees, so they cannot "
                    "catch a change"
                ),
            )
        ]
    if not mutants:
        return []
    required = math.ceil(contract.mutation_min_kill * len(mutants))
    survivors: list[str] = []
    done = 0

    def run(index: int) -> bool:
        rel, mutant = mutants[index]
        copy = variant_workspace(gate, str(index), {rel: mutant.text})
        try:
            request = SuiteRequest(
                workspace=copy, tests=contract.tests, tag=f"mutant-{index}", sources=contract.source
            )
            suite = run_suite(
                gate.lock,
                gate.dirs,
                request,
                memory_mb=contract.memory_limit_mb,
                timeout_s=min(contract.time_limit_s, MUTANT_TIME_LIMIT_S),
            )
            return killed(suite, new_ids, gate.first)  # type: ignore[arg-type]
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    with ThreadPoolExecutor(PARALLEL) as pool:
        while done < len(mutants):
            kills = done - len(survivors)
            if kills >= required or len(survivors) > len(mutants) - required:
                break  # the outcome is decided: spare the remaining runs
            batch = list(range(done, min(done + PARALLEL, len(mutants))))
            for index, dead in zip(batch, pool.map(run, batch), strict=True):
                if not dead:
                    rel, mutant = mutants[index]
                    survivors.append(f"{rel}:{mutant.line} {mutant.description}")
            done += len(batch)
    if len(survivors) > len(mutants) - required:
        return [
            Violation(
                rule="mutation.low_kill",
                message=(
                    f"{len(survivors)} of {done} mutants run survived the new tests; they "
                    "must kill at "
                    f"least {required} of {len(mutants)} (share {contract.mutation_min_kill:.0%}); "
                    f"surviving: {'; '.join(survivors[:5])}"
                ),
            )
        ]
    return []
