"""The gate: contract, diff scope, scratch apply, static scans, locked runs, coverage, verdict."""

from __future__ import annotations

import json
import shutil
import site
import sys
import time
from pathlib import Path

from guardrails import diffs
from guardrails.checks import (
    collected_count,
    content_violations,
    in_trees,
    mutation_violations,
    new_test_ids,
    order_violations,
    outcome_violations,
)
from guardrails.rolock import (
    RoLock,
    changed_paths,
    hash_violations,
    is_config_file,
    lock_manifest,
    manifest_digest,
    scratch_copy,
    select_lock,
    tree_manifest,
)
from guardrails.runner import (
    CoverageReader,
    GateDirs,
    SuiteRequest,
    SuiteResult,
    run_suite,
    write_gate_config,
)
from guardrails.verdict import PHASES, CoverageResult, LockInfo, TestCounts, Verdict, Violation
from guardrails.workspace import GateSetupError, GuardContract, check_holdout, load_contract

_APPLY = """import json, sys
sys.path[:0] = json.loads(sys.argv[1])
from pathlib import Path
from guardrails.diffs import apply_patch, parse_patch
result = apply_patch(parse_patch(Path(sys.argv[2]).read_text(encoding="utf-8")), Path(sys.argv[3]))
Path(sys.argv[4]).write_text(json.dumps({
    "violations": [v.model_dump() for v in result.violations],
    "added_lines": {path: sorted(lines) for path, lines in result.added_lines.items()}}))
"""


def _py_files(root: Path, trees: list[str]) -> list[Path]:
    return [path for tree in trees for path in sorted((root / tree).rglob("*.py"))]


class GateRun:
    """One judgement: each step returns violations; the first step that finds any ends it."""

    def __init__(self, contract: GuardContract, phase: str, lock: RoLock, expect: str | None,
                 holdout: Path | None) -> None:
        self.contract, self.phase, self.lock = contract, phase, lock
        self.expect, self.holdout = expect, holdout
        self.dirs = GateDirs.create()
        self.writable, self.locked = contract.writable(phase), contract.locked(phase)
        self.changes: list[diffs.FileChange] = []
        self.changed: list[str] = []
        self.added: dict[str, set[int]] = {}
        self.counts = TestCounts()
        self.coverage = CoverageResult(min=contract.coverage_min)
        self.digests = ("", "")
        self.first: SuiteResult | None = None

    def limits(self) -> dict[str, float | int]:
        """Time and memory limits of one locked run."""
        return {"timeout_s": self.contract.time_limit_s,
                "memory_mb": self.contract.memory_limit_mb}

    def hidden(self) -> tuple[Path, ...]:
        """Folders invisible to tested code: the held-out tests."""
        return (self.holdout,) if self.holdout else ()

    def check_diff(self, patch_text: str) -> list[Violation]:
        """Parse strictly and check every path against the phase's scope."""
        try:
            self.changes = diffs.parse_patch(patch_text)
        except diffs.PatchError as exc:
            return [Violation(rule="diff.malformed", message=str(exc))]
        return diffs.check_patch(self.changes, self.writable, self.locked, self.phase)

    def apply(self, patch_text: str) -> list[Violation]:
        """Apply inside the lock (locked trees read-only), then compare the trees file by file."""
        scratch_copy(self.contract.root, self.dirs.ws)
        before = tree_manifest(self.dirs.ws)
        patch_file, out_file = self.dirs.cfg / "patch.diff", self.dirs.results / "apply.json"
        patch_file.write_text(patch_text, encoding="utf-8")
        locked = [self.dirs.ws / tree for tree in self.locked if (self.dirs.ws / tree).exists()]
        locked += [self.dirs.ws / rel for rel in before if is_config_file(rel.rsplit("/", 1)[-1])
                   and not in_trees(rel, self.writable) and not (self.dirs.ws / rel).is_symlink()]
        paths = [str(Path(diffs.__file__).resolve().parent.parent), *site.getsitepackages()]
        argv = [sys.executable, "-I", "-S", "-B", "-c", _APPLY, json.dumps(paths),
                str(patch_file), str(self.dirs.ws), str(out_file)]
        run = self.lock.run(argv, cwd=self.dirs.root, env={"PATH": "/usr/bin:/bin"},
                            rw=[self.dirs.ws, self.dirs.results], ro=locked, hide=list(self.hidden()),
                            spec_dir=self.dirs.cfg, **self.limits())  # type: ignore[arg-type]
        try:
            applied = json.loads(out_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return [Violation(rule="lock.apply_refused", message=(
                "applying the patch failed inside the lock: " + run.stderr.strip()[-600:]))]
        found = [Violation(**item) for item in applied["violations"]]
        self.added = {path: set(lines) for path, lines in applied["added_lines"].items()}
        self.changed = changed_paths(before, tree_manifest(self.dirs.ws))
        declared = {p for change in self.changes for p in change.paths}
        for path in self.changed:
            if path not in declared or not in_trees(path, self.writable):
                found.append(Violation(rule="lock.undeclared_change", path=path, message=(
                    f"applying the patch changed {path}, which the patch does not declare "
                    "as a writable target")))
        return found

    def scan(self) -> list[Violation]:
        """Sanitizer on changed source (code-patch), test-quality rules on changed tests."""
        return content_violations(self.contract, self.phase, self.dirs.ws, self.changed)

    def request(self, **kwargs: object) -> SuiteRequest:
        """A visible-suite run over the scratch workspace."""
        ws = self.dirs.ws
        return SuiteRequest(rootdir=ws, targets=[ws / t for t in self.contract.tests],
                            paths=[ws], hide=self.hidden(), **kwargs)  # type: ignore[arg-type]

    def visible(self) -> list[Violation]:
        """The suite twice (forward with coverage, then reversed), hashes checked after."""
        locked_before = lock_manifest(self.dirs.ws, self.locked)
        measured = self.contract.source + (self.contract.tests if self.phase == "test-gen" else ())
        write_gate_config(self.dirs, [self.dirs.ws / tree for tree in measured])
        found: list[Violation] = []
        first = run_suite(self.lock, self.dirs, self.request(coverage=True, tag="forward"),
                          **self.limits())  # type: ignore[arg-type]
        self.first, suites = first, [first]
        if not any(problem.rule == "run.timeout" for problem in first.problems):
            suites.append(run_suite(self.lock, self.dirs,
                                    self.request(order="reverse", tag="reverse"),
                                    **self.limits()))  # type: ignore[arg-type]
            found += order_violations(first, suites[1])
        before_count = collected_count(self.contract.root, self.contract.tests)
        for suite in suites:
            new_ids = new_test_ids(self.contract, self.dirs.ws, suite.collected, self.changed)
            found += outcome_violations(suite, new_ids, self.expect, before_count)
        locked_after = lock_manifest(self.dirs.ws, self.locked)
        self.digests = (manifest_digest(locked_before), manifest_digest(locked_after))
        found += hash_violations(locked_before, locked_after, "during the test run")
        self.counts = TestCounts(collected=len(first.collected),
                                 passed=sum(first.outcome(i) == "passed" for i in first.collected),
                                 failed=len(first.failing()) + len(first.collect_errors))
        return _unique(found)

    def coverage_check(self) -> list[Violation]:
        """Branch coverage over S, diff coverage of added source lines and of new test lines."""
        assert self.first is not None and self.first.data_file is not None
        reader = CoverageReader(self.first.data_file, self.dirs.cfg / "coverage.rc")
        ws = self.dirs.ws
        percent = reader.branch_percent(_py_files(ws, list(self.contract.source)))
        self.coverage = CoverageResult(percent=round(percent, 2), min=self.contract.coverage_min)
        found = []
        if percent < self.contract.coverage_min:
            found.append(Violation(rule="coverage.below_min", message=(
                f"branch coverage over {', '.join(self.contract.source)} is {percent:.2f} %, "
                f"below the required {self.contract.coverage_min:g} %")))
        check_tests = self.phase == "test-gen" and self.expect != "red"
        for path, lines in sorted(self.added.items()):
            in_source, in_tests = in_trees(path, list(self.contract.source)), in_trees(path, self.writable)
            if not path.endswith(".py") or not (in_source or (check_tests and in_tests)):
                continue
            missed = lines & reader.missing_lines(ws / path)
            rule = "coverage.diff_line_missed" if in_source else "coverage.test_line_missed"
            found += [Violation(rule=rule, path=path, line=line, message=(
                f"line {line} added by the patch never ran under the tests")) for line in
                sorted(missed)]
            if in_source:
                found += [Violation(rule="coverage.import_time_only", path=path, line=line,
                                    message=f"line {line} ran only at import time, never in a test")
                          for line in sorted(reader.import_time_only(ws / path, lines - missed))]
        return found

    def held_out(self) -> list[Violation]:
        """The held-out tests against the patched workspace; failures named, never shown."""
        assert self.holdout is not None
        copy = self.dirs.root / "holdout" / "heldout_tests"
        shutil.copytree(self.holdout, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        request = SuiteRequest(rootdir=copy, targets=[copy], paths=[self.dirs.ws],
                               tag="holdout", hide=self.hidden())
        suite = run_suite(self.lock, self.dirs, request, **self.limits())  # type: ignore[arg-type]
        names = suite.failing() + sorted(suite.collect_errors)
        if suite.problems or not suite.collected:
            names.append("<the held-out run did not complete>")
        return [Violation(rule="holdout.failed", message=f"held-out test failed: {name}")
                for name in names]

    def mutation(self) -> list[Violation]:
        """New tests must kill enough simple mutants of the source code they exercise."""
        assert self.first is not None and self.first.data_file is not None
        new_ids = new_test_ids(self.contract, self.dirs.ws, self.first.collected, self.changed)
        if not new_ids or self.contract.mutation_max == 0:
            return []
        reader = CoverageReader(self.first.data_file, self.dirs.cfg / "coverage.rc")
        return mutation_violations(self, reader, new_ids)

    def finish(self, found: list[Violation], started: float) -> Verdict:
        """The verdict; accepted only without violations."""
        return Verdict(accepted=not found, phase=self.phase, violations=found, tests=self.counts,
                       coverage=self.coverage,
                       locks=LockInfo(backend=self.lock.backend, before=self.digests[0],
                                      after=self.digests[1]),
                       duration_s=round(time.monotonic() - started, 3))


def _unique(found: list[Violation]) -> list[Violation]:
    seen: dict[tuple[str, str | None, int | None, str], Violation] = {}
    for violation in found:
        seen.setdefault((violation.rule, violation.path, violation.line, violation.message),
                        violation)
    return list(seen.values())


def run_gate(workspace: Path, phase: str, patch_text: str, expect: str | None = None,
             holdout: Path | None = None, lock: str = "namespace") -> Verdict:
    """Judge one patch on a scratch copy of `workspace`; GateSetupError for usage/infra errors."""
    started = time.monotonic()
    if phase not in PHASES:
        raise GateSetupError(f"unknown phase {phase!r}: choose code-patch or test-gen")
    if expect not in (None, "red", "green") or (phase == "code-patch" and expect == "red"):
        raise GateSetupError(f"--expect {expect} is not valid for phase {phase}")
    contract = load_contract(Path(workspace))
    held = check_holdout(Path(holdout), contract.root) if holdout else contract.holdout
    gate = GateRun(contract, phase, select_lock(lock), expect, held)
    try:
        steps = [lambda: gate.check_diff(patch_text), lambda: gate.apply(patch_text), gate.scan,
                 gate.visible, gate.coverage_check]
        if held is not None:
            steps.append(gate.held_out)
        if phase == "test-gen" and expect != "red":
            steps.append(gate.mutation)
        for step in steps:
            found = step()
            if found:
                return gate.finish(found, started)
        return gate.finish([], started)
    finally:
        gate.dirs.remove()

