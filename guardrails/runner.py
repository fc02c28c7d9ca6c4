"""Locked runs: each pytest (or behaviour) run in a fresh sandbox with a fresh results folder.

Every run binds the same paths inside the sandbox: its workspace copy at /workspace (read-only),
the gate's files at /gate, its own spec at /spec.json, a results folder made empty for it alone
at /results, and for the held-out run only the held-out tests at /heldout. The judge reads the
results once, after the process is gone, and removes them; a run that wrote none is rejected.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from os.path import commonpath
from pathlib import Path
from typing import Any

from guardrails import behaviour, childrun
from guardrails.coverage_data import RCFILE
from guardrails.locks import Bind, RoLock, RunResult
from guardrails.verdict import Violation

WORKSPACE, GATE, RESULTS, HELDOUT, SPEC = "/workspace", "/gate", "/results", "/heldout", "/spec.json"
# The gate's own pytest settings: nothing from the workspace's configuration is read.
GATE_INI = """[pytest]
python_files = test_*.py *_test.py
python_classes = Test
python_functions = test
xfail_strict = true
junit_family = xunit2
console_output_style = classic
"""
# Interrupted, internal error, usage error (e.g. a conftest.py that fails to import).
PYTEST_STARTUP_ERRORS = (2, 3, 4)


@dataclass(frozen=True)
class GateDirs:
    """The gate's private area (0700): scratch workspace, its own files, one folder per run."""

    root: Path

    @classmethod
    def create(cls) -> GateDirs:
        """A fresh private area under the system temp folder, with the gate's files written."""
        dirs = cls(Path(tempfile.mkdtemp(prefix="oomrl-gate-")))
        # Whose it is: a caller killed mid-gate leaves it behind, and this tells its next run the
        # folder is an orphan once this process has gone ("<pid> <unix time>").
        (dirs.root / "owner").write_text(f"{os.getpid()} {time.time():.3f}", encoding="utf-8")
        for name in ("cfg", "runs"):
            (dirs.root / name).mkdir()
        (dirs.cfg / "pytest.ini").write_text(GATE_INI, encoding="utf-8")
        (dirs.cfg / "coverage.rc").write_text(RCFILE, encoding="utf-8")
        for module in (childrun, behaviour):
            shutil.copyfile(str(module.__file__), dirs.cfg / Path(str(module.__file__)).name)
        make_readable(dirs.cfg)
        return dirs

    # Alike in shape to the path properties of oomrl's settings: the gate depends on nothing it judges.
    @property
    def ws(self) -> Path:
        """The scratch copy of the workspace the patch is applied to."""
        return self.root / "ws"

    @property
    def cfg(self) -> Path:
        """The gate-owned ini, rcfile and child programs (read-only in every run)."""
        return self.root / "cfg"

    def run_dir(self, tag: str) -> Path:
        """A new, empty folder for one run (its spec, results and, unsandboxed, its HOME)."""
        folder = self.root / "runs" / tag
        if folder.exists():
            shutil.rmtree(folder)
        (folder / "results").mkdir(parents=True)
        (folder / "home").mkdir()
        return folder

    def remove(self) -> None:
        """Delete the private area."""
        shutil.rmtree(self.root, ignore_errors=True)


def make_readable(root: Path) -> None:
    """Folders 0755 and files 0644 below `root`: the sandbox uid must read the copies it runs."""
    root.chmod(0o755)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            (Path(folder) / name).chmod(0o755)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o644)


def hand_over(lock: RoLock, results: Path) -> None:
    """Make a run's results folder writable by the sandbox uid (and nobody else)."""
    if lock.os_level and os.geteuid() == 0:
        from guardrails.sandbox import SANDBOX_UID

        os.chown(results, SANDBOX_UID, SANDBOX_UID)
    results.chmod(0o700)


@dataclass
class SuiteResult:
    """One pytest run as the gate's plugin recorded it, plus problems with the run itself."""

    collected: list[str] = field(default_factory=list)
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    tamper: list[str] = field(default_factory=list)
    problems: list[Violation] = field(default_factory=list)
    data_file: Path | None = None
    behaviour: list[dict[str, Any]] | None = None

    def outcome(self, nodeid: str) -> str:
        """passed, failed, error, skipped, xfail or missing."""
        return str(self.outcomes.get(nodeid, {}).get("outcome", "missing"))

    def failing(self) -> list[str]:
        """Collected ids that did not pass."""
        return [nodeid for nodeid in self.collected if self.outcome(nodeid) != "passed"]


@dataclass(frozen=True)
class SuiteRequest:
    """What to run: a workspace copy, test trees in it (or held-out tests), order, coverage."""

    workspace: Path
    tests: tuple[str, ...]
    tag: str
    order: str = "forward"
    coverage: tuple[str, ...] = ()
    heldout: Path | None = None
    preimport: tuple[str, ...] = ()
    behaviour: dict[str, Any] | None = None


class LockedRun:
    """One run's binds and paths as the locked process sees them."""

    def __init__(self, lock: RoLock, dirs: GateDirs, workspace: Path, tag: str,
                 heldout: Path | None = None) -> None:
        self.lock, self.folder = lock, dirs.run_dir(tag)
        self.results = self.folder / "results"
        hand_over(lock, self.results)
        self.binds = [Bind(workspace, WORKSPACE), Bind(dirs.cfg, GATE),
                      Bind(self.folder / "spec.json", SPEC), Bind(self.results, RESULTS, True)]
        if heldout is not None:
            self.binds.append(Bind(heldout, HELDOUT))
        self.seen = {bind.inside: lock.inside(bind) for bind in self.binds}
        self.tmp = lock.env(self.folder / "home").get("TMPDIR", "/tmp")

    def path(self, inside: str, *parts: str) -> str:
        """An inside path (e.g. WORKSPACE, "strategies") as the locked process sees it."""
        return "/".join([self.seen[inside], *parts])

    def start(self, program: str, spec: dict[str, Any], timeout_s: float,
              memory_mb: int) -> RunResult:
        """Write the spec, run `python -I -S -B /gate/<program> /spec.json` locked."""
        spec = {**spec, "site": self.lock.site_paths()}
        (self.folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        (self.folder / "spec.json").chmod(0o644)
        argv = [self.lock.python(), "-I", "-S", "-B", self.path(GATE, program), self.path(SPEC)]
        return self.lock.run(argv, binds=self.binds, cwd=self.path(WORKSPACE),
                             env=self.lock.env(self.folder / "home"), timeout_s=timeout_s,
                             memory_mb=memory_mb)

    def read(self, name: str) -> Any:
        """A JSON file the run wrote in its results folder, or None (read once, then removed)."""
        try:
            return json.loads((self.results / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Remove the run's folder: nothing of it can serve a later run."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _pytest_args(run: LockedRun, request: SuiteRequest) -> tuple[list[str], str]:
    """pytest's arguments (the gate's ini, no cache, no plugin autoload) and the tests' root."""
    inside = HELDOUT if request.heldout is not None else WORKSPACE
    host = request.heldout or request.workspace
    present = [tree for tree in request.tests if (host / tree).exists()]
    folders = [run.path(inside, tree if (host / tree).is_dir() else os.path.dirname(tree))
               for tree in present] or [run.path(inside)]
    # no test folder at all: name the missing one so pytest fails loudly, never collecting
    # from the workspace root instead
    targets = [run.path(inside, tree) for tree in present or request.tests[:1]] or \
        [run.path(inside)]
    tests_root = commonpath(folders)
    return ["-c", run.path(GATE, "pytest.ini"), "--rootdir", run.path(inside),
            "--confcutdir", tests_root, "-p", "no:cacheprovider", "--disable-plugin-autoload",
            "-q", "--basetemp", f"{run.tmp}/pytest", "--junitxml", run.path(RESULTS, "junit.xml"),
            *targets], tests_root


def run_suite(lock: RoLock, dirs: GateDirs, request: SuiteRequest, *, timeout_s: float,
              memory_mb: int) -> SuiteResult:
    """Run pytest in a fresh sandbox; read outcomes from the gate's own results, once."""
    run = LockedRun(lock, dirs, request.workspace, request.tag, request.heldout)
    try:
        args, tests_root = _pytest_args(run, request)
        spec = {"paths": [run.path(WORKSPACE)], "workspace": run.path(WORKSPACE),
                "order": request.order, "results": run.path(RESULTS, "results.json"),
                "args": args, "tests_root": tests_root,
                "hypothesis": uses_hypothesis(request.heldout or request.workspace, request.tests),
                "rootdir": run.path(HELDOUT if request.heldout is not None else WORKSPACE), "preimport": list(request.preimport),
                "behaviour": request.behaviour,
                "coverage": {"data_file": run.path(RESULTS, "coverage"),
                             "rcfile": run.path(GATE, "coverage.rc"),
                             "source": [run.path(WORKSPACE, tree) for tree in request.coverage]}
                if request.coverage else None}
        result = run.start("childrun.py", spec, timeout_s, memory_mb)
        return _suite_result(run, request, result, timeout_s, dirs)
    finally:
        run.close()


def uses_hypothesis(root: Path, trees: tuple[str, ...]) -> bool:
    """Do the tests mention Hypothesis (then the child loads the gate's profile first)?"""
    folders = [root / tree for tree in trees] or [root]
    return any(b"hypothesis" in path.read_bytes() for folder in folders if folder.is_dir()
               for path in folder.rglob("*.py"))


def _suite_result(run: LockedRun, request: SuiteRequest, result: RunResult, timeout_s: float,
                  dirs: GateDirs) -> SuiteResult:
    suite = SuiteResult()
    if result.timed_out:
        suite.problems.append(Violation(rule="run.timeout", message=(
            f"the test run ({request.tag}) exceeded the time limit of {timeout_s:g} s")))
        return suite
    recorded = run.read("results.json")
    if not isinstance(recorded, dict) or recorded.get("finished") is not True:
        suite.problems.append(Violation(rule="run.incomplete", message=(
            f"the test run ({request.tag}) ended (exit code {result.returncode}) before the "
            f"gate's results were written: an early exit or a crash. "
            f"{result.stderr.strip()[-400:]}")))
        return suite
    suite.collected = list(recorded["collected"])
    suite.outcomes = dict(recorded["outcomes"])
    suite.collect_errors = dict(recorded["collect_errors"])
    suite.tamper = list(recorded["tamper"])
    suite.behaviour = recorded.get("behaviour")
    suite.problems += consistency(suite, recorded["exit_code"], run.results / "junit.xml",
                                  request.tag)
    if recorded["exit_code"] in PYTEST_STARTUP_ERRORS:
        output = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])[-1500:]
        suite.problems.append(Violation(rule="run.pytest_error", message=(
            f"pytest stopped with exit code {recorded['exit_code']} in {request.tag}:\n{output}")))
    if request.coverage and (run.results / "coverage").is_file():
        from guardrails.coverage_data import map_data

        suite.data_file = map_data(run.results / "coverage", dirs.root / f"coverage-{request.tag}",
                                   run.path(WORKSPACE), request.workspace)
    return suite


def consistency(suite: SuiteResult, exit_code: int, junit: Path, tag: str) -> list[Violation]:
    """Cross-check the plugin's record, the JUnit XML and the exit status against each other."""
    problems = []
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as exc:
        return [Violation(rule="run.no_results", message=f"no JUnit results for {tag}: {exc}")]
    cases = root.findall(".//testcase")
    junit_bad = sum(1 for case in cases for child in case
                    if child.tag in ("failure", "error", "skipped"))
    missing = [nodeid for nodeid in suite.collected if suite.outcome(nodeid) == "missing"]
    all_passed = not suite.failing() and not suite.collect_errors
    if missing:
        problems.append(Violation(rule="run.incomplete", message=(
            f"{len(missing)} collected tests have no result in {tag}, e.g. {missing[0]}")))
    if len(cases) < len(suite.collected) or (junit_bad > 0 and all_passed) \
            or (exit_code == 0) != (all_passed and bool(suite.collected)):
        problems.append(Violation(rule="run.results_mismatch", message=(
            f"results of {tag} disagree: {len(suite.collected)} collected, {len(cases)} JUnit "
            f"cases ({junit_bad} not passed), exit code {exit_code}")))
    return problems
