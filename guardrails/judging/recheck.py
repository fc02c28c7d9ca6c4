"""Every phase re-checks all of T for pytest hooks and forbidden capabilities, not only the patch.

The diff-based rules (`testquality.scan_tests`) judge what a patch changes. Take a hook or a
capability planted in an earlier tree. A later patch, a code patch included, would not show it. It
would then run in every test process from then on.
"""

from __future__ import annotations

from pathlib import Path

from guardrails.static import (
    Policy,
    discipline_findings,
    parse,
    read_source,
    to_violations,
    too_deep,
    with_siblings,
)
from guardrails.static import findings as capability_findings
from guardrails.verdict import Violation
from guardrails.workspace import GuardContract

# The rules judged on whole files: hooks and every capability rule of T's policy.
RECHECKED = ("tests.pytest_hook", "sanitizer.")


def recheck_file(
    path: str, data: bytes, policy: Policy, allow: frozenset[str] = frozenset()
) -> list[Violation]:
    """Hook and capability findings of one whole test file, judged as if newly written."""
    text, refused = read_source(path, data, "tests")
    if text is None:
        return [v for v in refused if v.rule not in allow]
    try:
        tree, errors = parse(path, text, "tests.syntax_error")
        if tree is None:
            return [e for e in errors if e.rule not in allow]
        found = [
            f
            for f in capability_findings(path, tree, policy) + discipline_findings(tree)
            if f.rule.startswith(RECHECKED)
        ]
    except RecursionError:
        return [v for v in too_deep(path, "tests.syntax_error") if v.rule not in allow]
    return to_violations(found, path, set(allow))


def recheck_tests(contract: GuardContract, ws: Path) -> list[Violation]:
    """All of T as it stands after the patch.

    That is every .py file below the contract's test trees.
    """
    policy = Policy.for_contract(contract, "test-gen")
    found: list[Violation] = []
    for tree in contract.tests:
        base = ws / tree
        for file in sorted(base.rglob("*.py")) if base.is_dir() else []:
            if file.is_file() and not file.is_symlink():
                # Sibling helpers are T's own, as in the patch
                path = file.relative_to(ws).as_posix()
                found += recheck_file(
                    path, file.read_bytes(), with_siblings(policy, ws, path), contract.allow
                )
    return found
