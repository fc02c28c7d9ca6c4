"""Locked runs: each pytest run in a fresh sandbox, S in a strategy host of its own, fresh results.

A run is two jails. The test process binds only these five.
- the tests of its workspace copy under /workspace (read-only; S is physically absent).
- the gate's files at /gate (the `strategy_host` client among them).
- its own spec at /spec.json.
- a results folder made empty for it alone at /results.
- for the held-out run only, the held-out tests at /heldout.
S runs in a strategy host, the jail every caller of S uses. The host measures S's coverage. The
parent relays the test process's requests to it. It reads the host's coverage when the tests are
done. The judge reads the results once, after the processes are gone, and removes them. A run that
wrote none is rejected.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from os.path import commonpath
from pathlib import Path
from typing import Any

import strategy_api
import strategy_host
from guardrails.child import childrun
from guardrails.sandbox.coverage_data import RCFILE
from guardrails.sandbox.locks import Bind, RoLock, RunResult, make_readable
from guardrails.sandbox.tempdirs import owned_temp_dir
from guardrails.verdict import Violation

WORKSPACE, GATE, RESULTS, HELDOUT, SPEC = (
    "/workspace",
    "/gate",
    "/results",
    "/heldout",
    "/spec.json",
)
PLUGINS = "/plugins"
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
        # Whose it is: a caller killed mid-gate leaves it behind.
        # Its note tells the next run the folder is an orphan once this process has gone.
        dirs = cls(owned_temp_dir("oomrl-gate-"))
        for name in ("cfg", "runs"):
            (dirs.root / name).mkdir()
        (dirs.cfg / "pytest.ini").write_text(GATE_INI, encoding="utf-8")
        (dirs.cfg / "coverage.rc").write_text(RCFILE, encoding="utf-8")
        shutil.copyfile(str(childrun.__file__), dirs.cfg / Path(str(childrun.__file__)).name)
        for package in (strategy_host, strategy_api):  # the client, and the API a probe may share
            shutil.copytree(
                Path(str(package.__file__)).parent,
                dirs.cfg / "client" / package.__name__,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "serve.py"),
            )
        make_readable(dirs.cfg)
        return dirs

    # Alike in shape to the path properties of oomrl's settings.
    # The gate depends on nothing it judges.
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


def hand_over(lock: RoLock, results: Path) -> None:
    """Make a run's results folder writable by the sandbox uid (and nobody else)."""
    if lock.os_level and os.geteuid() == 0:
        from guardrails.sandbox.bwrap import SANDBOX_UID

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
    reports: dict[str, Any] = field(default_factory=dict)  # what each extra plugin wrote

    def outcome(self, nodeid: str) -> str:
        """passed, failed, error, skipped, xfail or missing."""
        return str(self.outcomes.get(nodeid, {}).get("outcome", "missing"))

    def failing(self) -> list[str]:
        """Collected ids that did not pass."""
        return [nodeid for nodeid in self.collected if self.outcome(nodeid) != "passed"]


@dataclass(frozen=True)
class SuiteRequest:
    """What to run: a workspace copy, its S and test trees (or held-out tests), order, coverage."""

    workspace: Path
    tests: tuple[str, ...]
    tag: str
    order: str = "forward"
    coverage: tuple[str, ...] = ()  # trees to measure: S's in the host, T's in the test process
    heldout: Path | None = None
    sources: tuple[str, ...] = ("strategies",)
    # Extra pytest plugins of a trusted caller (name, source, config). Each runs in the test
    # process. It reads its config from `<name>.json` next to it. It may write
    # `/results/<name>.json`.
    plugins: tuple[tuple[str, str, dict[str, Any]], ...] = ()


class LockedRun:
    """One run's binds and paths as the locked process sees them."""

    def __init__(
        self,
        lock: RoLock,
        dirs: GateDirs,
        workspace: Path,
        tag: str,
        heldout: Path | None = None,
        trees: tuple[str, ...] = (),
        plugins: tuple[tuple[str, str, dict[str, Any]], ...] = (),
    ) -> None:
        self.lock, self.folder = lock, dirs.run_dir(tag)
        self.results = self.folder / "results"
        hand_over(lock, self.results)
        self.plugins = [name for name, _, _ in plugins]
        # Only the test trees of the workspace.
        # S is not in the test process's jail at all.
        self.binds = [
            Bind(workspace / tree, f"{WORKSPACE}/{tree}")
            for tree in trees
            if (workspace / tree).exists()
        ]
        # No test tree at all: an empty /workspace to start in
        if not self.binds and heldout is None:
            (self.folder / "empty").mkdir()
            self.binds.append(Bind(self.folder / "empty", WORKSPACE))
        self.binds += [
            Bind(dirs.cfg, GATE),
            Bind(self.folder / "spec.json", SPEC),
            Bind(self.results, RESULTS, True),
        ]
        if heldout is not None:
            self.binds.append(Bind(heldout, HELDOUT))
        if plugins:
            (self.folder / "plugins").mkdir()
            self.binds.append(Bind(self.folder / "plugins", PLUGINS))
        self.seen = {bind.inside: lock.inside(bind) for bind in self.binds}
        self.seen[WORKSPACE] = lock.inside(Bind(workspace, WORKSPACE))
        for name, source, config in plugins:
            (self.folder / "plugins" / f"{name}.py").write_text(source, encoding="utf-8")
            report = self.path(RESULTS, f"{name}.json")
            (self.folder / "plugins" / f"{name}.json").write_text(
                json.dumps({**config, "report": report}), encoding="utf-8"
            )
        if plugins:
            make_readable(self.folder / "plugins")
        self.tmp = lock.env(self.folder / "home").get("TMPDIR", "/tmp")

    def path(self, inside: str, *parts: str) -> str:
        """An inside path (e.g. WORKSPACE, "strategies") as the locked process sees it."""
        return "/".join([self.seen[inside], *parts])

    def start(
        self,
        program: str,
        spec: dict[str, Any],
        timeout_s: float,
        memory_mb: int,
        pass_fds: tuple[int, ...] = (),
    ) -> RunResult:
        """Write the spec, run `python -I -S -B /gate/<program> /spec.json` locked."""
        spec = {**spec, "site": self.lock.site_paths()}
        (self.folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        (self.folder / "spec.json").chmod(0o644)
        argv = [self.lock.python(), "-I", "-S", "-B", self.path(GATE, program), self.path(SPEC)]
        cwd = self.path(HELDOUT) if HELDOUT in self.seen else self.path(WORKSPACE)
        return self.lock.run(
            argv,
            binds=self.binds,
            cwd=cwd,
            env=self.lock.env(self.folder / "home"),
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            pass_fds=pass_fds,
        )

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
    folders = [
        run.path(inside, tree if (host / tree).is_dir() else os.path.dirname(tree))
        for tree in present
    ] or [run.path(inside)]
    # No test folder at all: name the missing one so pytest fails loudly.
    # It must never collect from the workspace root instead.
    targets = [run.path(inside, tree) for tree in present or request.tests[:1]] or [
        run.path(inside)
    ]
    tests_root = commonpath(folders)
    extra = [arg for name in run.plugins for arg in ("-p", name)]
    return [
        "-c",
        run.path(GATE, "pytest.ini"),
        "--rootdir",
        run.path(inside),
        "--confcutdir",
        tests_root,
        "-p",
        "no:cacheprovider",
        "--disable-plugin-autoload",
        *extra,
        "-q",
        "--basetemp",
        f"{run.tmp}/pytest",
        "--junitxml",
        run.path(RESULTS, "junit.xml"),
        *targets,
    ], tests_root


def run_suite(
    lock: RoLock, dirs: GateDirs, request: SuiteRequest, *, timeout_s: float, memory_mb: int
) -> SuiteResult:
    """Run pytest in a fresh sandbox against S in a fresh strategy host; read outcomes once."""
    from guardrails.sandbox.strategyhost import HostSpec, relay, start_host

    run = LockedRun(
        lock,
        dirs,
        request.workspace,
        request.tag,
        request.heldout,
        request.tests if request.heldout is None else (),
        request.plugins,
    )
    measured_source = tuple(t for t in request.coverage if t in request.sources)
    measured_tests = tuple(t for t in request.coverage if t not in request.sources)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ThreadPoolExecutor(1) as starter:  # the host starts while the test process does
        pending = starter.submit(
            start_host,
            lock,
            HostSpec(
                request.workspace, request.sources, bool(measured_source), memory_mb, timeout_s
            ),
        )
        try:
            args, tests_root = _pytest_args(run, request)
            spec = {
                "paths": [
                    run.path(GATE, "client"),
                    run.path(WORKSPACE),
                    *([run.path(PLUGINS)] if request.plugins else []),
                ],
                "workspace": run.path(WORKSPACE),
                "order": request.order,
                "results": run.path(RESULTS, "results.json"),
                "args": args,
                "tests_root": tests_root,
                "host_fd": theirs.fileno(),
                "hypothesis": uses_hypothesis(request.heldout or request.workspace, request.tests),
                "rootdir": run.path(HELDOUT if request.heldout is not None else WORKSPACE),
                "coverage": {
                    "data_file": run.path(RESULTS, "coverage"),
                    "rcfile": run.path(GATE, "coverage.rc"),
                    "source": [run.path(WORKSPACE, tree) for tree in measured_tests],
                }
                if measured_tests
                else None,
            }
            pump = _relay_when_started(pending, ours, relay)
            try:
                result = run.start(
                    "childrun.py", spec, timeout_s, memory_mb, pass_fds=(theirs.fileno(),)
                )
            finally:
                theirs.close()
            pump.join(timeout_s)
            host_data, host_problem = _finish_host(pending, request.tag)
            suite = _suite_result(run, request, result, timeout_s, dirs, host_data)
            if host_problem is not None and not suite.problems:
                suite.problems.append(host_problem)
            return suite
        finally:
            ours.close()
            if pending.done() and pending.exception() is None:
                pending.result().close()
            run.close()


def _relay_when_started(pending: Future[Any], ours: socket.socket, relay: Any) -> threading.Thread:
    """A thread that relays the test process to the host once it has started.

    On failure it closes instead.
    """

    def pump() -> None:
        try:
            host = pending.result()
        except Exception:  # noqa: BLE001 - the run then fails its calls, and _finish_host says why
            ours.close()
            return
        relay(host, ours).join()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _finish_host(pending: Future[Any], tag: str) -> tuple[bytes | None, Violation | None]:
    """The host's coverage data, or the problem that kept it from serving the run."""
    try:
        host = pending.result()
    except Exception as exc:  # noqa: BLE001 - S broke its host's start (e.g. exits at import)
        return None, Violation(
            rule="run.host_failed",
            message=(f"the strategy host of the test run ({tag}) did not start: {str(exc)[-600:]}"),
        )
    try:
        answer = host.finish()
    except Exception as exc:  # noqa: BLE001 - a host that dies or hangs at the end forfeits the run
        return None, Violation(
            rule="run.host_failed",
            message=(
                f"the strategy host of the test run ({tag}) did not finish: {str(exc)[-600:]}"
            ),
        )
    data = answer.get("coverage")
    return (bytes(data) if data is not None else None), None


def results_bytes(folder: Path) -> int:
    """Bytes of the files below `folder` (links not followed)."""
    return sum(
        os.lstat(os.path.join(top, name)).st_size
        for top, _, names in os.walk(folder)
        for name in names
    )


def uses_hypothesis(root: Path, trees: tuple[str, ...]) -> bool:
    """Do the tests mention Hypothesis (then the child loads the gate's profile first)?"""
    folders = [root / tree for tree in trees] or [root]
    return any(
        b"hypothesis" in path.read_bytes()
        for folder in folders
        if folder.is_dir()
        for path in folder.rglob("*.py")
    )


def _suite_result(
    run: LockedRun,
    request: SuiteRequest,
    result: RunResult,
    timeout_s: float,
    dirs: GateDirs,
    host_data: bytes | None = None,
) -> SuiteResult:
    suite = SuiteResult()
    if result.timed_out:
        suite.problems.append(
            Violation(
                rule="run.timeout",
                message=(
                    f"the test run ({request.tag}) exceeded the time limit of {timeout_s:g} s"
                ),
            )
        )
        return suite
    from guardrails.sandbox.locks import MIB, WRITABLE_BYTES

    used = results_bytes(run.results)
    # The results tmpfs is full: what the run wrote may be cut short
    if used >= WRITABLE_BYTES - MIB:
        suite.problems.append(
            Violation(
                rule="run.results_too_large",
                message=(
                    f"the test run ({request.tag}) wrote {used / MIB:.0f} MiB to its "
                    "results folder, "
                    f"whose limit is {WRITABLE_BYTES // MIB} MiB"
                ),
            )
        )
        return suite
    recorded = run.read("results.json")
    if not isinstance(recorded, dict) or recorded.get("finished") is not True:
        suite.problems.append(
            Violation(
                rule="run.incomplete",
                message=(
                    f"the test run ({request.tag}) ended (exit code {result.returncode}) "
                    "before the "
                    f"gate's results were written: an early exit or a crash. "
                    f"{result.stderr.strip()[-400:]}"
                ),
            )
        )
        return suite
    suite.collected = list(recorded["collected"])
    suite.outcomes = dict(recorded["outcomes"])
    suite.collect_errors = dict(recorded["collect_errors"])
    suite.tamper = list(recorded["tamper"])
    suite.reports = {name: run.read(f"{name}.json") for name in run.plugins}
    suite.problems += consistency(
        suite, recorded["exit_code"], run.results / "junit.xml", request.tag
    )
    if recorded["exit_code"] in PYTEST_STARTUP_ERRORS:
        output = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])[-1500:]
        suite.problems.append(
            Violation(
                rule="run.pytest_error",
                message=(
                    f"pytest stopped with exit code {recorded['exit_code']} in "
                    f"{request.tag}:\n{output}"
                ),
            )
        )
    if request.coverage:
        suite.data_file = _join_coverage(run, request, dirs, host_data)
    return suite


def _join_coverage(
    run: LockedRun, request: SuiteRequest, dirs: GateDirs, host_data: bytes | None
) -> Path | None:
    """S's coverage (from the host) and T's (from the test process), mapped to the scratch copy."""
    from guardrails.sandbox.coverage_data import map_data

    parts = []
    if host_data is not None:
        raw = dirs.root / f"coverage-host-{request.tag}"
        raw.write_bytes(host_data)
        parts.append(raw)
    if (run.results / "coverage").is_file():
        parts.append(run.results / "coverage")
    if not parts:
        return None
    target = dirs.root / f"coverage-{request.tag}"
    for part in parts:  # both saw the workspace at the same inside path
        map_data(part, target, run.path(WORKSPACE), request.workspace)
    return target


def consistency(suite: SuiteResult, exit_code: int, junit: Path, tag: str) -> list[Violation]:
    """Cross-check the plugin's record, the JUnit XML and the exit status against each other."""
    problems = []
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as exc:
        return [Violation(rule="run.no_results", message=f"no JUnit results for {tag}: {exc}")]
    cases = root.findall(".//testcase")
    junit_bad = sum(
        1 for case in cases for child in case if child.tag in ("failure", "error", "skipped")
    )
    missing = [nodeid for nodeid in suite.collected if suite.outcome(nodeid) == "missing"]
    all_passed = not suite.failing() and not suite.collect_errors
    if missing:
        problems.append(
            Violation(
                rule="run.incomplete",
                message=(
                    f"{len(missing)} collected tests have no result in {tag}, e.g. {missing[0]}"
                ),
            )
        )
    if (
        len(cases) < len(suite.collected)
        or (junit_bad > 0 and all_passed)
        or (exit_code == 0) != (all_passed and bool(suite.collected))
    ):
        problems.append(
            Violation(
                rule="run.results_mismatch",
                message=(
                    f"results of {tag} disagree: {len(suite.collected)} collected, "
                    f"{len(cases)} JUnit "
                    f"cases ({junit_bad} not passed), exit code {exit_code}"
                ),
            )
        )
    return problems
