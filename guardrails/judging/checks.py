"""The gate's judging rules on scanned files and on recorded test outcomes."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from guardrails.errors import GateSetupError
from guardrails.sandbox import SuiteResult
from guardrails.static import Policy, sanitizer, testquality, weakening
from guardrails.verdict import Violation
from guardrails.workspace import GuardContract

TEST_FILE_PREFIX, TEST_FILE_SUFFIX = "test_", "_test.py"
NODE_ID = re.compile(weakening.NODE_ID + r"(?:\[.*\])?")  # a parametrized id's cases ignored


def in_trees(path: str, trees: list[str] | tuple[str, ...]) -> bool:
    """True when `path` is one of `trees` or lies below one of them."""
    return any(path == tree or path.startswith(tree + "/") for tree in trees)


def read_bytes(path: Path) -> bytes | None:
    """A file's bytes, or None when it does not exist (or is not a file)."""
    return path.read_bytes() if path.is_file() and not path.is_symlink() else None


def _is_test_file(path: Path) -> bool:
    return path.suffix == ".py" and (
        path.name.startswith(TEST_FILE_PREFIX) or path.name.endswith(TEST_FILE_SUFFIX)
    )


def collected_count(root: Path, trees: tuple[str, ...]) -> int:
    """Tests defined in the test files of `trees`, counted statically."""
    total = 0
    for tree in trees:
        base = root / tree
        files = base.rglob("*.py") if base.is_dir() else [base] if base.is_file() else []
        total += sum(
            testquality.count_tests(path.read_bytes()) for path in files if _is_test_file(path)
        )
    return total


def superseded_names(node_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """The approved mandate's superseded tests as file -> qualified names ('TestY.test_z').

    GateSetupError names an id that is not a test's node id.
    """
    found: dict[str, set[str]] = {}
    for node_id in node_ids:
        match = NODE_ID.fullmatch(node_id.strip())
        if match is None:
            raise GateSetupError(
                f"--supersedes {node_id!r} is not a test's node id: write "
                "'tests/path/test_file.py::test_name' (or '::TestClass::test_name')"
            )
        found.setdefault(match[1], set()).add(match[2].replace("::", "."))
    return {path: frozenset(names) for path, names in found.items()}


def content_violations(
    contract: GuardContract,
    phase: str,
    ws: Path,
    changed: list[str],
    superseded: Mapping[str, frozenset[str]] | None = None,
) -> list[Violation]:
    """Capability sanitizer on changed S files (code-patch); test discipline on changed T files.

    `superseded` is for red mode only. It holds the old tests the approved mandate names. When
    changed, they are judged as red tests instead of by tests.weakened.
    """
    found: list[Violation] = []
    policy = Policy.for_contract(contract, phase)
    for path in changed:
        new = read_bytes(ws / path)
        if new is None or not path.endswith(".py"):
            continue
        old = read_bytes(contract.root / path)
        if phase == "code-patch" and in_trees(path, contract.source):
            found += sanitizer.scan_source(path, new, old, policy, contract.allow)
        elif phase == "test-gen" and in_trees(path, contract.tests):
            found += testquality.scan_tests(
                path,
                new,
                old,
                testquality.with_siblings(policy, ws, path),
                contract.allow,
                (superseded or {}).get(path, frozenset()),
            )
    if phase == "test-gen":
        before, after = (
            collected_count(contract.root, contract.tests),
            collected_count(ws, contract.tests),
        )
        if after < before:
            found.append(
                Violation(
                    rule="tests.fewer_than_before",
                    message=(
                        f"the tests define {after} tests, fewer than the {before} before the patch"
                    ),
                )
            )
    return found


def _test_definitions(data: bytes | None) -> dict[str, str]:
    """Qualified test names ('test_x', 'TestY.test_z') mapped to a dump of their code."""
    try:
        tree = ast.parse(data or b"")
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(
                    item, (ast.FunctionDef, ast.AsyncFunctionDef)
                ) and item.name.startswith("test"):
                    found[f"{node.name}.{item.name}"] = ast.dump(item)
    return found


def qualname(nodeid: str) -> str:
    """'tests/t.py::TestA::test_b[1]' -> 'TestA.test_b'."""
    return ".".join(nodeid.split("::")[1:]).split("[", 1)[0]


def new_test_ids(
    contract: GuardContract, ws: Path, collected: list[str], changed: list[str]
) -> list[str]:
    """Collected ids of tests the patch added or changed."""
    names: dict[str, set[str]] = {}
    for path in changed:
        if in_trees(path, contract.tests) and path.endswith(".py"):
            old = _test_definitions(read_bytes(contract.root / path))
            new = _test_definitions(read_bytes(ws / path))
            names[path] = {name for name, code in new.items() if old.get(name) != code}
    return [
        nodeid
        for nodeid in collected
        if qualname(nodeid) in names.get(nodeid.split("::", 1)[0], set())
    ]


def superseded_ids(
    contract: GuardContract, new_ids: list[str], superseded: Mapping[str, frozenset[str]]
) -> list[str]:
    """The changed tests among `new_ids` that existed before the patch and the mandate names.

    The mandate is the approved one. Red mode judges these as red tests.
    """
    old = {
        path: _test_definitions(read_bytes(contract.root / path))
        for path in {nodeid.split("::", 1)[0] for nodeid in new_ids}
    }
    return [
        nodeid
        for nodeid in new_ids
        if qualname(nodeid) in old[nodeid.split("::", 1)[0]]
        and qualname(nodeid) in superseded.get(nodeid.split("::", 1)[0], frozenset())
    ]


def _failure(nodeid: str, rule: str, text: str, detail: str = "") -> Violation:
    tail = "\n".join(detail.strip().splitlines()[-12:])[-900:]
    return Violation(
        rule=rule,
        path=nodeid.split("::", 1)[0] or None,
        message=f"{nodeid}: {text}" + (f"\n{tail}" if tail else ""),
    )


def run_violations(suite: SuiteResult, before_count: int) -> list[Violation]:
    """Problems of the run itself: incomplete, tampered, nothing or too little collected."""
    found = list(suite.problems)
    found += [Violation(rule="run.tamper", message=text) for text in suite.tamper]
    found += [
        _failure(nodeid, "tests.collection_error", "collection failed", detail)
        for nodeid, detail in suite.collect_errors.items()
    ]
    if not suite.problems and not suite.collected and not suite.collect_errors:
        found.append(Violation(rule="tests.none_collected", message="no test was collected"))
    if suite.collected and len(suite.collected) < before_count:
        found.append(
            Violation(
                rule="tests.fewer_than_before",
                message=(
                    f"{len(suite.collected)} tests collected, fewer than the {before_count} before"
                ),
            )
        )
    return found


def outcome_violations(
    suite: SuiteResult,
    new_ids: list[str],
    expect: str | None,
    preexisting: frozenset[str] = frozenset(),
) -> list[Violation]:
    """Every test passes, nothing skipped; under --expect red, new tests fail by assertion.

    Unchanged tests that already failed before the patch (`preexisting`) are not blamed on it.
    """
    found: list[Violation] = []
    red = expect == "red"
    if red and not new_ids and suite.collected:
        found.append(
            Violation(
                rule="redgreen.no_new_tests",
                message=("--expect red needs new or changed tests that fail on the current source"),
            )
        )
    for nodeid in suite.collected:
        outcome, entry = suite.outcome(nodeid), suite.outcomes.get(nodeid, {})
        detail = str(entry.get("message", ""))
        if red and nodeid in new_ids:
            if outcome == "passed":
                found.append(
                    _failure(
                        nodeid,
                        "redgreen.not_red",
                        ("passes on the current source, so it does not test the mandate"),
                    )
                )
            elif not (outcome == "failed" and entry.get("assertion")):
                found.append(
                    _failure(
                        nodeid,
                        "redgreen.not_assertion",
                        (
                            f"must fail by an assertion, not {outcome} "
                            f"({entry.get('exc_type', 'no exception')})"
                        ),
                        detail,
                    )
                )
        elif outcome in ("skipped", "xfail"):
            found.append(_failure(nodeid, "tests.skipped", f"{outcome}: skips are not allowed"))
        elif outcome in ("failed", "error") and nodeid not in preexisting:
            found.append(_failure(nodeid, "tests.failed", outcome, detail))
    return found


def unchanged_failures(suite: SuiteResult, new_ids: list[str]) -> list[str]:
    """Failing tests the patch did not add or change (candidates for pre-existing failures)."""
    return [
        nodeid
        for nodeid in suite.failing()
        if nodeid not in new_ids and suite.outcome(nodeid) in ("failed", "error")
    ]


def order_violations(first: SuiteResult, second: SuiteResult) -> list[Violation]:
    """Both orders must collect the same tests with the same outcome counts and outcomes."""
    if first.problems or second.problems:
        return []
    if sorted(first.collected) != sorted(second.collected):
        return [
            Violation(
                rule="tests.order_dependent",
                message=("the forward and reversed runs collected different tests"),
            )
        ]
    return [
        _failure(
            nodeid,
            "tests.order_dependent",
            (
                f"{first.outcome(nodeid)} in file order but {second.outcome(nodeid)} in "
                "reverse order"
            ),
        )
        for nodeid in first.collected
        if first.outcome(nodeid) != second.outcome(nodeid)
    ]
