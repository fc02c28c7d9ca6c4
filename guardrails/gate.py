"""The gate: contract, diff scope, scratch apply, static scans, sandboxed runs, coverage,
verdict."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from guardrails.errors import GateSetupError
from guardrails.judging import (
    behaviour_violations,
    child_spec,
    collected_count,
    content_violations,
    in_trees,
    load_inputs,
    new_test_ids,
    order_violations,
    outcome_violations,
    recheck_tests,
    red_violations,
    run_violations,
    superseded_ids,
    superseded_names,
    unchanged_failures,
)
from guardrails.patch import diffs
from guardrails.sandbox import (
    CoverageReader,
    GateDirs,
    RoLock,
    SuiteRequest,
    SuiteResult,
    changed_paths,
    hash_violations,
    lock_manifest,
    make_readable,
    manifest_digest,
    run_suite,
    scratch_copy,
    select_lock,
    tree_manifest,
)
from guardrails.verdict import PHASES, CoverageResult, LockInfo, TestCounts, Verdict, Violation
from guardrails.workspace import GuardContract, check_holdout, load_contract

logger = logging.getLogger(__name__)


def _py_files(root: Path, trees: tuple[str, ...]) -> list[Path]:
    return [path for tree in trees for path in sorted((root / tree).rglob("*.py"))]


def _modules(root: Path, trees: tuple[str, ...]) -> tuple[str, ...]:
    """Importable names of the source modules ('strategies/a/b.py' -> 'strategies.a.b')."""
    names = []
    for path in _py_files(root, trees):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if all(part.isidentifier() for part in parts):
            names.append(".".join(parts))
    return tuple(names)


class GateRun:
    """One judgement: each step returns violations; the first step that finds any ends it."""

    def __init__(
        self,
        contract: GuardContract,
        phase: str,
        lock: RoLock,
        expect: str | None,
        holdout: Path | None,
        superseded: dict[str, frozenset[str]] | None = None,
    ) -> None:
        self.contract, self.phase, self.lock = contract, phase, lock
        self.expect, self.holdout = expect, holdout
        # Red mode: the old tests the approved mandate names.
        # The caller gives them; they are never read from the workspace the gate judges.
        self.superseded = superseded or {}
        self.behaviour = load_inputs(contract.behaviour, holdout)
        self.dirs = GateDirs.create()
        self.writable, self.locked = contract.writable(phase), contract.locked(phase)
        self.changes: list[diffs.FileChange] = []
        self.changed: list[str] = []
        self.added: dict[str, set[int]] = {}
        self.modules: tuple[str, ...] = ()
        self.counts = TestCounts()
        self.coverage = CoverageResult(min=contract.coverage_min)
        self.digests = ("", "")
        self.first: SuiteResult | None = None
        self.new_ids: list[str] = []
        self.notes: list[str] = []
        self.reader: CoverageReader | None = None

    def limits(self) -> dict[str, Any]:
        """Time and memory limits of one locked run."""
        return {"timeout_s": self.contract.time_limit_s, "memory_mb": self.contract.memory_limit_mb}

    def check_diff(self, patch_text: str) -> list[Violation]:
        """Parse strictly and check every path against the phase's scope."""
        try:
            self.changes = diffs.parse_patch(patch_text)
        except diffs.PatchError as exc:
            return [Violation(rule="diff.malformed", message=str(exc))]
        return diffs.check_patch(self.changes, self.writable, self.locked, self.phase)

    def apply(self) -> list[Violation]:
        """Apply to the scratch copy (never through links), then compare the trees file by file."""
        scratch_copy(self.contract.root, self.dirs.ws)
        before = tree_manifest(self.dirs.ws)
        result = diffs.apply_patch(self.changes, self.dirs.ws)
        found = list(result.violations)
        self.added = result.added_lines
        self.changed = changed_paths(before, tree_manifest(self.dirs.ws))
        declared = {p for change in self.changes for p in change.paths}
        for path in self.changed:
            if path not in declared or not in_trees(path, self.writable):
                found.append(
                    Violation(
                        rule="lock.undeclared_change",
                        path=path,
                        message=(
                            f"applying the patch changed {path}, which the patch does not declare "
                            "as a writable target"
                        ),
                    )
                )
        make_readable(self.dirs.ws)
        self.modules = _modules(self.dirs.ws, self.contract.source)
        return found

    def scan(self) -> list[Violation]:
        """Capability sanitizer on changed source (code-patch), test discipline on changed tests.

        In every phase, hooks and capabilities are checked over all of T.
        """
        return _unique(
            content_violations(
                self.contract, self.phase, self.dirs.ws, self.changed, self.superseded
            )
            + recheck_tests(self.contract, self.dirs.ws)
        )

    def request(self, tag: str, **kwargs: Any) -> SuiteRequest:
        """A visible-suite run over the scratch workspace."""
        return SuiteRequest(
            workspace=self.dirs.ws,
            tests=self.contract.tests,
            tag=tag,
            sources=self.contract.source,
            **kwargs,
        )

    def both(self, first: Any, second: Any) -> tuple[Any, Any]:
        """Two independent runs side by side (two cores), each in its own sandbox."""
        if not self.lock.os_level:
            # Nothing stops a patch writing to the workspace the other run reads.
            # So side by side its verdict would depend on timing. One after the other it does not.
            return first(), second()
        with ThreadPoolExecutor(2) as pool:
            one, two = pool.submit(first), pool.submit(second)
            return one.result(), two.result()

    def visible(self) -> list[Violation]:
        """The suite twice at once (forward with coverage, reversed), hashes checked after."""
        locked_before = lock_manifest(self.dirs.ws, self.locked)
        measured = self.contract.source + (self.contract.tests if self.phase == "test-gen" else ())
        first, second = self.both(
            lambda: run_suite(
                self.lock, self.dirs, self.request("forward", coverage=measured), **self.limits()
            ),
            lambda: run_suite(
                self.lock, self.dirs, self.request("reverse", order="reverse"), **self.limits()
            ),
        )
        self.first = first
        self.new_ids = new_test_ids(self.contract, self.dirs.ws, first.collected, self.changed)
        before_count = collected_count(self.contract.root, self.contract.tests)
        found = order_violations(first, second)
        preexisting = self.preexisting(first)
        for suite in (first, second):
            found += run_violations(suite, before_count)
            found += outcome_violations(suite, self.new_ids, self.expect, preexisting)
        if self.expect == "red" and not found:
            # values S computes reach a test only through strategy_host's calls
            packages = (*(tree.replace("/", ".") for tree in self.contract.source), "strategy_host")
            found += red_violations(first, self.new_ids, self.dirs.ws, packages)
            self.notes += [
                f"superseded old test (judged as a red test): {nodeid}"
                for nodeid in superseded_ids(self.contract, self.new_ids, self.superseded)
            ]
        locked_after = lock_manifest(self.dirs.ws, self.locked)
        self.digests = (manifest_digest(locked_before), manifest_digest(locked_after))
        found += hash_violations(locked_before, locked_after, "during the test run")
        self.counts = TestCounts(
            collected=len(first.collected),
            passed=sum(first.outcome(i) == "passed" for i in first.collected),
            failed=len(first.failing()) + len(first.collect_errors),
        )
        return _unique(found)

    def preexisting(self, first: SuiteResult) -> frozenset[str]:
        """Test-gen: unchanged tests that fail here and already failed before the patch."""
        candidates = unchanged_failures(first, self.new_ids)
        if self.phase != "test-gen" or not candidates or first.problems:
            return frozenset()
        original = self.dirs.root / "original"
        scratch_copy(self.contract.root, original)
        make_readable(original)
        before = run_suite(
            self.lock,
            self.dirs,
            SuiteRequest(
                workspace=original,
                tests=self.contract.tests,
                tag="original",
                sources=self.contract.source,
            ),
            **self.limits(),
        )
        old = {
            nodeid for nodeid in before.failing() if before.outcome(nodeid) in ("failed", "error")
        }
        kept = frozenset(c for c in candidates if c in old)
        self.notes += [
            f"pre-existing failure (failed before the patch too): {nodeid}"
            for nodeid in sorted(kept)
        ]
        return kept

    def coverage_check(self) -> list[Violation]:
        """Branch coverage over S, diff coverage of added source lines and of new test lines."""
        assert self.first is not None
        if self.first.data_file is None:
            return [Violation(rule="run.no_coverage", message="the forward run saved no coverage")]
        reader = CoverageReader(self.first.data_file, self.dirs.cfg / "coverage.rc")
        ws = self.dirs.ws
        files = _py_files(ws, self.contract.source)
        # Its exact exclusions hold the version branches never taken
        percent = reader.branch_percent(files)
        self.coverage = CoverageResult(percent=round(percent, 2), min=self.contract.coverage_min)
        found = []
        if percent < self.contract.coverage_min:
            found.append(
                Violation(
                    rule="coverage.below_min",
                    message=(
                        f"branch coverage over {', '.join(self.contract.source)} is "
                        f"{percent:.2f} %, "
                        f"below the required {self.contract.coverage_min:g} %"
                    ),
                )
            )
        check_tests = self.phase == "test-gen" and self.expect != "red"
        for path, lines in sorted(self.added.items()):
            in_source = in_trees(path, self.contract.source)
            if not path.endswith(".py") or not (
                in_source or (check_tests and in_trees(path, self.writable))
            ):
                continue
            missed = lines & reader.missing_lines(ws / path)  # without the gate's exact exclusions
            rule = "coverage.diff_line_missed" if in_source else "coverage.test_line_missed"
            found += [
                Violation(
                    rule=rule,
                    path=path,
                    line=line,
                    message=(f"line {line} added by the patch never ran under the tests"),
                )
                for line in sorted(missed)
            ]
            if in_source:
                found += [
                    Violation(
                        rule="coverage.import_time_only",
                        path=path,
                        line=line,
                        message=f"line {line} ran only at import time, never in a test",
                    )
                    for line in sorted(reader.import_time_only(ws / path, lines - missed))
                ]
        self.reader = reader
        return found

    def held_out(self) -> list[Violation]:
        """Held-out tests and the behaviour cases, side by side.

        Held-out tests get their own sandbox and host. The behaviour cases get a fresh host. The
        gate itself calls it, as production calls it.
        """
        tests = self.holdout is not None and any(self.holdout.rglob("test_*.py"))
        heldout = self.dirs.root / "heldout"
        scratch_copy(self.holdout, heldout)  # type: ignore[arg-type]
        make_readable(heldout)
        request = SuiteRequest(
            workspace=self.dirs.ws,
            tests=(),
            tag="holdout",
            heldout=heldout,
            sources=self.contract.source,
        )
        suite, plain = self.both(
            lambda: run_suite(self.lock, self.dirs, request, **self.limits()) if tests else None,
            lambda: self.production(child_spec(self.behaviour) if self.behaviour else None),
        )
        found: list[Violation] = []
        if tests:
            names = suite.failing() + sorted(suite.collect_errors)
            if suite.problems or not suite.collected:
                names.append("<the held-out run did not complete>")
            found += [
                Violation(rule="holdout.failed", message=f"held-out test failed: {name}")
                for name in names
            ]
        if self.behaviour is not None:
            found += behaviour_violations(self.behaviour, plain)
        return found

    def production(self, spec: dict[str, Any] | None) -> Any:
        """The behaviour cases through a fresh strategy host, the gate as the caller.

        Returns outputs or None.
        """
        if spec is None:
            return None
        from guardrails.judging import run_cases
        from guardrails.sandbox import HostSpec, start_host

        try:
            host = start_host(
                self.lock,
                HostSpec(
                    self.dirs.ws,
                    self.contract.source,
                    False,
                    self.contract.memory_limit_mb,
                    self.contract.time_limit_s,
                ),
            )
        except Exception:  # noqa: BLE001 - S broke its host: no outputs, behaviour.incomplete
            return None
        try:
            return run_cases(host.request, spec)
        except Exception:  # noqa: BLE001 - the host died or broke the protocol mid-way
            return None
        finally:
            host.close()

    def trivial(self) -> list[Violation]:
        """Red mode: the new failing tests must also fail on trivial candidates in place of S."""
        from guardrails.judging import trivial_violations

        assert self.first is not None
        red = [n for n in self.new_ids if self.first.outcome(n) == "failed"]
        return trivial_violations(self, red) if red else []

    def mutation(self) -> list[Violation]:
        """New tests must kill enough simple mutants of the source code they exercise."""
        from guardrails.judging import mutation_violations

        if not self.new_ids or self.contract.mutation_max == 0:
            return []
        assert self.reader is not None
        return mutation_violations(self, self.reader, self.new_ids)

    def finish(self, found: list[Violation], started: float) -> Verdict:
        """The verdict; accepted only without violations."""
        return Verdict(
            accepted=not found,
            phase=self.phase,
            violations=found,
            tests=self.counts,
            coverage=self.coverage,
            locks=LockInfo(
                backend=self.lock.backend, before=self.digests[0], after=self.digests[1]
            ),
            duration_s=round(time.monotonic() - started, 3),
            notes=self.notes,
        )


def _unique(found: list[Violation]) -> list[Violation]:
    seen: dict[tuple[str, str | None, int | None, str], Violation] = {}
    for violation in found:
        seen.setdefault(
            (violation.rule, violation.path, violation.line, violation.message), violation
        )
    return list(seen.values())


def run_gate(
    workspace: Path,
    phase: str,
    patch_text: str,
    expect: str | None = None,
    holdout: Path | None = None,
    lock: str | None = None,
    supersedes: Sequence[str] = (),
) -> Verdict:
    """Judge one patch on a scratch copy of `workspace`; GateSetupError for usage/infra errors.

    `lock` None picks the strongest sandbox available (bwrap). "namespace" is an alias of bwrap.
    `supersedes` is for test-gen --expect red only. It holds the node ids of the old tests the
    approved mandate makes obsolete. A changed one is judged as a red test. Every other old test is
    judged by tests.weakened.
    """
    started = time.monotonic()
    if phase not in PHASES:
        raise GateSetupError(f"unknown phase {phase!r}: choose code-patch or test-gen")
    if expect not in (None, "red", "green") or (phase == "code-patch" and expect == "red"):
        raise GateSetupError(f"--expect {expect} is not valid for phase {phase}")
    if supersedes and expect != "red":
        raise GateSetupError(
            "--supersedes names old tests a mandate makes obsolete: it is only "
            "valid with --phase test-gen --expect red"
        )
    superseded = superseded_names(supersedes)
    contract = load_contract(Path(workspace))
    held = check_holdout(Path(holdout), contract.root) if holdout else contract.holdout
    gate = GateRun(contract, phase, select_lock(lock), expect, held, superseded)
    try:
        steps = [
            lambda: gate.check_diff(patch_text),
            gate.apply,
            gate.scan,
            gate.visible,
            gate.coverage_check,
        ]
        if held is not None:
            steps.append(gate.held_out)
        if phase == "test-gen" and expect != "red":
            steps.append(gate.mutation)
        if expect == "red":
            steps.append(gate.trivial)
        for step in steps:
            found = step()
            if found:
                logger.warning(
                    "%s patch rejected: %d violation(s), first %s", phase, len(found), found[0].rule
                )
                return gate.finish(found, started)
        logger.info("%s patch accepted", phase)
        return gate.finish([], started)
    finally:
        gate.dirs.remove()
