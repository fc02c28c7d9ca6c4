"""Child-side test run: the gate's pytest plugin and the launcher that runs pytest under coverage.

The gate starts `python -I -S -B /gate/childrun.py /spec.json` in a fresh sandbox. The sandbox
holds the tests and not S. The launcher works in this order.
- It imports everything it needs first, so nothing in the workspace can shadow it.
- It puts only the paths the spec names on sys.path.
- It connects `strategy_host` to the channel the gate handed over. S runs in its host. The host
  imported every source module before the first test, in the import context.
- It starts coverage of the test trees when asked.
- It runs pytest with this module as its one extra plugin.
- It saves the coverage data and only then writes the results file. A run that exits early leaves
  no results, which the judge rejects.
The plugin records every collected id and outcome by node id, and where a failing test failed. It
can reverse the order. It switches the coverage context at test boundaries, here and in the host.
Each call names the running test.
"""

from __future__ import annotations

import builtins
import json
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # started with -S: the interpreter's site folders come from the spec
    sys.path.extend(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))["site"])

import coverage
import pytest
from _pytest.reports import TestReport

IMPORT_CONTEXT, SESSION_CONTEXT = "", "session"
HYPOTHESIS_PROFILE = "oomrl-gate"


class GatePlugin:
    """Collects outcomes by node id, switches coverage contexts, notices tampering."""

    def __init__(
        self,
        order: str,
        workspace: str,
        cov: coverage.Coverage | None = None,
        tests_root: str = "",
        rootdir: str = "",
        host: Any = None,
    ) -> None:
        self.order, self.workspace, self.cov, self.host = order, workspace, cov, host
        self.tests_root, self.rootdir = tests_root.rstrip("/") + "/", rootdir.rstrip("/") + "/"
        self.collected: list[str] = []
        self.collect_errors: dict[str, str] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.tamper: list[str] = []
        self._builtins = dict(vars(builtins))
        self._meta_path = list(sys.meta_path)
        # Taken before pytest starts: initial conftests load before pytest_configure.
        self._report_factory = TestReport.__dict__["from_item_and_call"]

    def _context(self, name: str) -> None:
        if self.cov is not None:
            self.cov.switch_context(name)
        if self.host is not None:
            self.host.set_context(name)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors[report.nodeid or "<session>"] = str(report.longrepr)[-2000:]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.order == "reverse":
            items.reverse()
        self.collected = [item.nodeid for item in items]

    def pytest_collection_finish(self) -> None:
        self._context(SESSION_CONTEXT)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self._context(item.nodeid)
        try:
            return (yield)
        finally:
            self._context(SESSION_CONTEXT)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        # After the other implementations. Only then has pytest's unittest plugin put a TestCase's
        # failure (an assertEqual) into call.excinfo. It is None before.
        report = yield
        if call.excinfo is not None and call.when == "call":
            entry = self.outcomes.setdefault(item.nodeid, {})
            entry["exc_type"] = call.excinfo.typename
            entry["assertion"] = bool(
                call.excinfo.errisinstance(AssertionError)
                or (
                    call.excinfo.typename == "Failed" and "DID NOT RAISE" in str(call.excinfo.value)
                )
            )
            entry["where"] = self._where(call.excinfo.traceback)
            entry["source_raised"] = _raised_by_source(call.excinfo)
        return report

    def _where(self, traceback: Any) -> list[Any] | None:
        """(path, line) of the deepest frame in the test files: where the test itself failed."""
        for frame in reversed(list(traceback)):
            path = str(frame.path)
            if path.startswith(self.tests_root) and path.startswith(self.rootdir):
                return [path[len(self.rootdir) :], frame.lineno + 1]
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.outcomes.setdefault(report.nodeid, {})
        if hasattr(report, "wasxfail"):
            entry["outcome"] = "xfail"
        elif report.skipped:
            entry["outcome"] = "skipped"
        elif report.failed:
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry.setdefault("message", str(report.longrepr)[-2000:])
        elif report.when == "call":
            entry.setdefault("outcome", "passed")

    def pytest_sessionfinish(self) -> None:
        if TestReport.__dict__["from_item_and_call"] is not self._report_factory:
            self.tamper.append("pytest's TestReport.from_item_and_call was replaced")
        for name, value in self._builtins.items():
            if vars(builtins).get(name, None) is not value:
                self.tamper.append(f"builtins.{name} was replaced")
        for finder in [f for f in sys.meta_path if f not in self._meta_path]:
            module = sys.modules.get(type(finder).__module__)
            origin = str(getattr(module, "__file__", "") or "")
            if origin.startswith(self.workspace):
                self.tamper.append(f"import hook {type(finder).__name__} installed from {origin}")

    def results(self, exit_code: int) -> dict[str, Any]:
        """Everything the judge needs, marked finished."""
        return {
            "finished": True,
            "exit_code": exit_code,
            "collected": self.collected,
            "collect_errors": self.collect_errors,
            "outcomes": self.outcomes,
            "tamper": self.tamper,
        }


def _raised_by_source(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """Did S raise this, rather than the test's own code?

    S raised it if it is a StrategyError the client raised on the host's error answer. The deepest
    frame must be the client's. A test that builds and raises a StrategyError itself is its own
    deepest frame.
    """
    client = sys.modules.get("strategy_host.client")
    error_type = getattr(client, "StrategyError", None)
    if client is None or error_type is None or not excinfo.errisinstance(error_type):
        return False
    if getattr(excinfo.value, "kind", "") != "strategy" or not len(excinfo.traceback):
        return False
    return str(excinfo.traceback[-1].path) == str(Path(str(client.__file__)))


def hypothesis_profile() -> None:
    """Deterministic Hypothesis, loaded before any test module is imported.

    It is derandomized, with no database. It has no deadline or health checks that depend on the
    machine's load.
    """
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        HYPOTHESIS_PROFILE,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    settings.load_profile(HYPOTHESIS_PROFILE)


def main(spec_path: str) -> int:
    """Run pytest as the spec says; write the results file last."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    sys.path[:0] = spec["paths"]
    host = _connect(spec.get("host_fd"))
    cov = None
    if spec["coverage"]:
        cov = coverage.Coverage(
            data_file=spec["coverage"]["data_file"],
            config_file=spec["coverage"]["rcfile"],
            source=spec["coverage"]["source"],
        )
        cov.start()
    plugin = GatePlugin(
        spec["order"],
        spec["workspace"],
        cov,
        spec.get("tests_root", ""),
        spec.get("rootdir", ""),
        host,
    )
    if spec.get("hypothesis"):
        hypothesis_profile()
    try:
        code = int(pytest.main(spec["args"], plugins=[plugin]))
    finally:
        if cov is not None:
            cov.stop()
            cov.save()
    Path(spec["results"]).write_text(json.dumps(plugin.results(code)), encoding="utf-8")
    return code


def _connect(fd: int | None) -> Any:
    """`strategy_host` (the client the tests import) on the channel to this run's host."""
    if fd is None:
        return None
    import strategy_host
    from strategy_host.client import Channel

    strategy_host.connect(Channel(fd, fd, timeout_s=24 * 3600.0))  # the gate's relay enforces time
    return strategy_host


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
