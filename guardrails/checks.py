"""The gate's judging rules on scanned files and on recorded test outcomes (red/green, mutants)."""

from __future__ import annotations

import ast
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from guardrails import sanitizer, testquality
from guardrails.runner import CoverageReader, SuiteRequest, SuiteResult, run_suite
from guardrails.verdict import Violation
from guardrails.workspace import GuardContract

if TYPE_CHECKING:
    from guardrails.gate import GateRun
    from guardrails.mutation import Mutant

TEST_FILE_PREFIX, TEST_FILE_SUFFIX = "test_", "_test.py"
MUTANT_TIME_LIMIT_S = 60.0


def in_trees(path: str, trees: list[str] | tuple[str, ...]) -> bool:
    """True when `path` is one of `trees` or lies below one of them."""
    return any(path == tree or path.startswith(tree + "/") for tree in trees)


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _is_test_file(path: Path) -> bool:
    return path.suffix == ".py" and (path.name.startswith(TEST_FILE_PREFIX)
                                     or path.name.endswith(TEST_FILE_SUFFIX))


def collected_count(root: Path, trees: tuple[str, ...]) -> int:
    """Tests defined in the test files of `trees`, counted statically."""
    total = 0
    for tree in trees:
        base = root / tree
        files = base.rglob("*.py") if base.is_dir() else [base] if base.is_file() else []
        total += sum(testquality.count_tests(_read(f) or "") for f in files if _is_test_file(f))
    return total


def content_violations(contract: GuardContract, phase: str, ws: Path,
                       changed: list[str]) -> list[Violation]:
    """Sanitizer on changed S files (code-patch); test-quality rules on changed T files."""
    found: list[Violation] = []
    allow = set(contract.allow)
    for path in changed:
        new_text = _read(ws / path)
        if new_text is None:
            continue
        old_text = _read(contract.root / path)
        if phase == "code-patch" and in_trees(path, contract.source):
            found += sanitizer.scan_source(path, new_text, old_text, allow)
        elif phase == "test-gen" and in_trees(path, contract.tests):
            packages = tuple(tree.replace("/", ".") for tree in contract.source)
            found += testquality.scan_tests(path, new_text, old_text, allow,
                                            source_packages=packages)
    if phase == "test-gen":
        before, after = collected_count(contract.root, contract.tests), collected_count(
            ws, contract.tests)
        if after < before:
            found.append(Violation(rule="tests.fewer_than_before", message=(
                f"the tests define {after} tests, fewer than the {before} before the patch")))
    return found


def _test_definitions(text: str | None) -> dict[str, str]:
    """Qualified test names ('test_x', 'TestY.test_z') mapped to a dump of their code."""
    try:
        tree = ast.parse(text or "")
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and item.name.startswith("test"):
                    found[f"{node.name}.{item.name}"] = ast.dump(item)
    return found


def qualname(nodeid: str) -> str:
    """'tests/t.py::TestA::test_b[1]' -> 'TestA.test_b'."""
    return ".".join(nodeid.split("::")[1:]).split("[", 1)[0]


def new_test_ids(contract: GuardContract, ws: Path, collected: list[str],
                 changed: list[str]) -> list[str]:
    """Collected ids of tests the patch added or changed."""
    names: dict[str, set[str]] = {}
    for path in changed:
        if in_trees(path, contract.tests) and path.endswith(".py"):
            old = _test_definitions(_read(contract.root / path))
            new = _test_definitions(_read(ws / path))
            names[path] = {name for name, code in new.items() if old.get(name) != code}
    return [nodeid for nodeid in collected
            if qualname(nodeid) in names.get(nodeid.split("::", 1)[0], set())]


def _failure(nodeid: str, rule: str, text: str, detail: str = "") -> Violation:
    tail = "\n".join(detail.strip().splitlines()[-12:])[-900:]
    return Violation(rule=rule, path=nodeid.split("::", 1)[0] or None,
                     message=f"{nodeid}: {text}" + (f"\n{tail}" if tail else ""))


def outcome_violations(suite: SuiteResult, new_ids: list[str], expect: str | None,
                       before_count: int) -> list[Violation]:
    """Every test passes (new tests fail by assertion under --expect red), nothing skipped."""
    found = list(suite.problems)
    found += [Violation(rule="run.tamper", message=text) for text in suite.tamper]
    found += [_failure(nodeid, "tests.collection_error", "collection failed", detail)
              for nodeid, detail in suite.collect_errors.items()]
    if not suite.problems and not suite.collected and not suite.collect_errors:
        found.append(Violation(rule="tests.none_collected", message="no test was collected"))
    if suite.collected and len(suite.collected) < before_count:
        found.append(Violation(rule="tests.fewer_than_before", message=(
            f"{len(suite.collected)} tests collected, fewer than the {before_count} before")))
    red = expect == "red"
    if red and not new_ids and suite.collected:
        found.append(Violation(rule="redgreen.no_new_tests", message=(
            "--expect red needs new or changed tests that fail on the current source")))
    for nodeid in suite.collected:
        outcome, entry = suite.outcome(nodeid), suite.outcomes.get(nodeid, {})
        detail = str(entry.get("message", ""))
        if red and nodeid in new_ids:
            if outcome == "passed":
                found.append(_failure(nodeid, "redgreen.not_red", (
                    "passes on the current source, so it does not test the mandate")))
            elif not (outcome == "failed" and entry.get("assertion")):
                found.append(_failure(nodeid, "redgreen.not_assertion", (
                    f"must fail by an assertion, not {outcome} "
                    f"({entry.get('exc_type', 'no exception')})"), detail))
        elif outcome in ("skipped", "xfail"):
            found.append(_failure(nodeid, "tests.skipped", f"{outcome}: skips are not allowed"))
        elif outcome in ("failed", "error"):
            found.append(_failure(nodeid, "tests.failed", outcome, detail))
    return found


def order_violations(first: SuiteResult, second: SuiteResult) -> list[Violation]:
    """Both orders must collect the same tests with the same outcomes."""
    if first.problems or second.problems:
        return []
    if set(first.collected) != set(second.collected):
        return [Violation(rule="tests.order_dependent", message=(
            "the forward and reversed runs collected different tests"))]
    return [_failure(nodeid, "tests.order_dependent", (
        f"{first.outcome(nodeid)} in file order but {second.outcome(nodeid)} in reverse order"))
        for nodeid in first.collected if first.outcome(nodeid) != second.outcome(nodeid)]


def mutation_violations(gate: GateRun, reader: CoverageReader,
                        new_ids: list[str]) -> list[Violation]:
    """Run the new tests against simple mutants of the source lines they execute."""
    from guardrails import mutation  # only test-gen needs the mutant generator

    contract, ws = gate.contract, gate.dirs.ws
    names = {qualname(nodeid) for nodeid in new_ids}
    mutants: list[tuple[str, Mutant]] = []
    exercised = False
    for tree in contract.source:
        for path in sorted((ws / tree).rglob("*.py")):
            lines = reader.lines_run_by(path, names)
            exercised = exercised or bool(lines)
            room = contract.mutation_max - len(mutants)
            if lines and room > 0:
                text = path.read_text(encoding="utf-8")
                rel = path.relative_to(ws).as_posix()
                mutants += [(rel, m) for m in mutation.generate_mutants(text, lines, room)]
    if not exercised:
        return [Violation(rule="mutation.nothing_exercised", message=(
            "the new tests execute no line of the source trees, so they cannot catch a change"))]
    if not mutants:
        return []
    copy = gate.dirs.root / "mutant"
    shutil.copytree(ws, copy)
    survivors: list[str] = []
    required = math.ceil(contract.mutation_min_kill * len(mutants))
    for index, (rel, mutant) in enumerate(mutants):
        killed = index - len(survivors)
        if killed >= required or len(survivors) > len(mutants) - required:
            break  # the outcome is decided: spare the remaining runs
        target = copy / rel
        original = target.read_text(encoding="utf-8")
        target.write_text(mutant.text, encoding="utf-8")
        request = SuiteRequest(rootdir=copy, targets=[copy / t for t in contract.tests],
                               paths=[copy], tag=f"mutant-{index}", extra_args=("-x",),
                               select=tuple(f"{copy}/{nodeid}" for nodeid in new_ids),
                               hide=gate.hidden())
        try:
            suite = run_suite(gate.lock, gate.dirs, request, memory_mb=contract.memory_limit_mb,
                              timeout_s=min(contract.time_limit_s, MUTANT_TIME_LIMIT_S))
        finally:
            target.write_text(original, encoding="utf-8")
        if not (suite.problems or suite.failing() or suite.collect_errors):
            survivors.append(f"{rel}:{mutant.line} {mutant.description}")
    if len(survivors) > len(mutants) - required:
        return [Violation(rule="mutation.low_kill", message=(
            f"{len(survivors)} of {len(mutants)} mutants survived the new tests; they must kill "
            f"at least {required} (share "
            f"{contract.mutation_min_kill:.0%}); surviving: {'; '.join(survivors[:5])}"))]
    return []
