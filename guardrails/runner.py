"""The coverage gate's runner: pytest + coverage in a separate locked process, with gate settings only."""

from __future__ import annotations

import ast
import io
import json
import shutil
import site
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from os.path import commonpath
from pathlib import Path
from typing import Any

import coverage

from guardrails import childrun
from guardrails.nsexec import SETUP_FAILED
from guardrails.rolock import RoLock
from guardrails.verdict import Violation
from guardrails.workspace import GateSetupError

# The gate's own pytest settings: nothing from the workspace's configuration is read.
GATE_INI = """[pytest]
python_files = test_*.py *_test.py
python_classes = Test
python_functions = test
xfail_strict = true
junit_family = xunit2
console_output_style = classic
"""
# Pragmas are not honoured: the exclusion patterns never match real code.
RCFILE = """[run]
branch = True
dynamic_context = test_function
source =
{source}
[report]
exclude_lines = oomrl-gate-never-excluded-4b1d
partial_branches = oomrl-gate-never-partial-4b1d
"""
# Interrupted, internal error, usage error (e.g. a conftest.py that fails to import).
PYTEST_STARTUP_ERRORS = (2, 3, 4)


@dataclass(frozen=True)
class GateDirs:
    """The gate's private area: scratch workspace, its own configuration, results, temp space."""

    root: Path

    @classmethod
    def create(cls) -> GateDirs:
        """A fresh private area under the system temp folder, readable by the locked child."""
        root = Path(tempfile.mkdtemp(prefix="oomrl-gate-"))
        root.chmod(0o755)
        for name in ("cfg", "results", "tmp"):
            (root / name).mkdir()
        return cls(root)

    @property
    def ws(self) -> Path:
        """The scratch copy of the workspace the patch is applied to."""
        return self.root / "ws"

    @property
    def cfg(self) -> Path:
        """The gate-owned ini, rcfile and launcher (read-only for the child)."""
        return self.root / "cfg"

    @property
    def results(self) -> Path:
        """Where the child writes JUnit XML, the results file and coverage data."""
        return self.root / "results"

    @property
    def tmp(self) -> Path:
        """Temp space for the tests (tmp_path, HOME, TMPDIR)."""
        return self.root / "tmp"

    def remove(self) -> None:
        """Delete the private area."""
        shutil.rmtree(self.root, ignore_errors=True)


def write_gate_config(dirs: GateDirs, measured: list[Path]) -> None:
    """Write the gate's ini and rcfile and a frozen copy of the child launcher."""
    (dirs.cfg / "pytest.ini").write_text(GATE_INI, encoding="utf-8")
    source = "\n".join(f"    {path}" for path in measured)
    (dirs.cfg / "coverage.rc").write_text(RCFILE.format(source=source), encoding="utf-8")
    shutil.copyfile(childrun.__file__, dirs.cfg / "childrun.py")


def clean_env(dirs: GateDirs) -> dict[str, str]:
    """The only environment the tested code sees."""
    (dirs.tmp / "home").mkdir(exist_ok=True)
    (dirs.tmp / "tmp").mkdir(exist_ok=True)
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(dirs.tmp / "home"),
            "TMPDIR": str(dirs.tmp / "tmp"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


@dataclass
class SuiteResult:
    """One pytest run as the gate's plugin recorded it, plus problems with the run itself."""

    collected: list[str] = field(default_factory=list)
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    tamper: list[str] = field(default_factory=list)
    problems: list[Violation] = field(default_factory=list)
    data_file: Path | None = None

    def outcome(self, nodeid: str) -> str:
        """passed, failed, error, skipped, xfail or missing."""
        return str(self.outcomes.get(nodeid, {}).get("outcome", "missing"))

    def failing(self) -> list[str]:
        """Collected ids that did not pass."""
        return [nodeid for nodeid in self.collected if self.outcome(nodeid) != "passed"]


@dataclass(frozen=True)
class SuiteRequest:
    """What to run: targets below `rootdir`, import paths, order, coverage on or off."""

    rootdir: Path
    targets: list[Path]
    paths: list[Path]
    order: str = "forward"
    coverage: bool = False
    tag: str = "run"
    extra_args: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    hide: tuple[Path, ...] = ()


def _pytest_args(dirs: GateDirs, request: SuiteRequest) -> list[str]:
    existing = [p for p in request.targets if p.exists()]
    folders = [p if p.is_dir() else p.parent for p in existing] or [request.rootdir]
    return ["-c", str(dirs.cfg / "pytest.ini"), "--rootdir", str(request.rootdir),
            "--confcutdir", commonpath([str(p) for p in folders]), "-p", "no:cacheprovider",
            "-q", "--basetemp", str(dirs.tmp / f"basetemp-{request.tag}"),
            "--junitxml", str(dirs.results / f"junit-{request.tag}.xml"),
            *request.extra_args,
            # no test folder at all: name the missing one so pytest fails loudly, never collecting
            # from the workspace root instead
            *(request.select or [str(p) for p in existing] or [str(request.targets[0])])]


def run_suite(lock: RoLock, dirs: GateDirs, request: SuiteRequest, *, timeout_s: float,
              memory_mb: int) -> SuiteResult:
    """Run pytest in a locked child; read outcomes from the gate's own results, never exit status."""
    results_file = dirs.results / f"results-{request.tag}.json"
    data_file = dirs.results / f"coverage-{request.tag}"
    spec = {"site": site.getsitepackages(), "paths": [str(p) for p in request.paths],
            "workspace": str(request.rootdir), "order": request.order,
            "results": str(results_file), "args": _pytest_args(dirs, request),
            "coverage": {"data_file": str(data_file), "rcfile": str(dirs.cfg / "coverage.rc")}
            if request.coverage else None}
    spec_file = dirs.cfg / f"spec-{request.tag}.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    # -B: nothing is written; the scratch copy holds no byte code and locked trees cannot gain any
    # (read-only, or caught by the hash manifest), so only the interpreter's own caches are read.
    argv = [sys.executable, "-I", "-S", "-B", str(dirs.cfg / "childrun.py"), str(spec_file)]
    run = lock.run(argv, cwd=request.rootdir, env=clean_env(dirs), rw=[dirs.results, dirs.tmp],
                   ro=[], hide=list(request.hide), timeout_s=timeout_s, memory_mb=memory_mb,
                   spec_dir=dirs.cfg)
    if run.returncode == SETUP_FAILED and "oomrl-gate-lock-failed" in run.stderr:
        raise GateSetupError(f"the {lock.backend} lock could not be set up: {run.stderr.strip()}")
    suite = SuiteResult(data_file=data_file if request.coverage else None)
    if run.timed_out:
        suite.problems.append(Violation(rule="run.timeout", message=(
            f"the test run ({request.tag}) exceeded the time limit of {timeout_s:g} s")))
        return suite
    try:
        recorded = json.loads(results_file.read_text(encoding="utf-8"))
        assert recorded.get("finished") is True
    except (OSError, ValueError, AssertionError):
        suite.problems.append(Violation(rule="run.incomplete", message=(
            f"the test run ({request.tag}) ended (exit code {run.returncode}) before the gate's "
            f"results were written: an early exit or a crash. {run.stderr.strip()[-400:]}")))
        return suite
    suite.collected = list(recorded["collected"])
    suite.outcomes = dict(recorded["outcomes"])
    suite.collect_errors = dict(recorded["collect_errors"])
    suite.tamper = list(recorded["tamper"])
    suite.problems += _consistency(suite, recorded["exit_code"],
                                   dirs.results / f"junit-{request.tag}.xml", request.tag)
    if recorded["exit_code"] in PYTEST_STARTUP_ERRORS:
        output = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])[-1500:]
        suite.problems.append(Violation(rule="run.pytest_error", message=(
            f"pytest stopped with exit code {recorded['exit_code']} in {request.tag}:\n{output}")))
    return suite


def _consistency(suite: SuiteResult, exit_code: int, junit: Path, tag: str) -> list[Violation]:
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


def function_body_lines(text: str) -> set[int]:
    """Lines inside function bodies: they must run under a test, not only at import time."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return lines


class CoverageReader:
    """Reads the child's coverage data in the judging process, with the gate's rcfile."""

    def __init__(self, data_file: Path, rcfile: Path) -> None:
        self.cov = coverage.Coverage(data_file=str(data_file), config_file=str(rcfile))
        self.cov.load()
        self.data = self.cov.get_data()

    def branch_percent(self, files: list[Path]) -> float:
        """Branch coverage over `files`; files never imported count as not covered at all."""
        if not files:
            return 100.0
        return float(self.cov.report(morfs=[str(f) for f in files], file=io.StringIO()))

    def missing_lines(self, path: Path) -> set[int]:
        """Statements of `path` never executed."""
        return set(self.cov.analysis2(str(path))[3])

    def contexts(self, path: Path) -> dict[int, list[str]]:
        """For each executed line, the test contexts it ran in ('' = import/collection time)."""
        return dict(self.data.contexts_by_lineno(str(path)))

    def import_time_only(self, path: Path, lines: set[int]) -> set[int]:
        """Of `lines` inside function bodies, those executed only outside any test."""
        body = function_body_lines(path.read_text(encoding="utf-8"))
        contexts = self.contexts(path)
        return {line for line in lines & body
                if line in contexts and not any(contexts[line])}

    def lines_run_by(self, path: Path, test_names: set[str]) -> set[int]:
        """Lines of `path` executed in the context of one of `test_names` (qualified names)."""
        return {line for line, names in self.contexts(path).items()
                if any(_context_matches(name, test_names) for name in names)}


def _context_matches(context: str, test_names: set[str]) -> bool:
    return any(context == name or context.endswith("." + name) for name in test_names)
