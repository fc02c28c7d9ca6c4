"""Child-side test run: the gate's pytest plugin and the launcher that runs pytest under coverage.

The gate starts `python -I -S -B childrun.py SPEC.json` in a separate, locked process. The
launcher puts only the paths the spec names on sys.path, starts coverage with the gate's own
rcfile, runs pytest with this module as its one extra plugin, saves the coverage data, and only
then writes the results file. A run that exits early therefore leaves no results, which the judge
rejects. The plugin records every collected id and every outcome by node id, can reverse the test
order, and notes tampering with pytest's report factory, the import system or builtins.
"""

from __future__ import annotations

import builtins
import json
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # started with -S: the interpreter's site folders come from the spec
    sys.path.extend(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))["site"])

import coverage
import pytest
from _pytest.reports import TestReport


def _meta_path_modules() -> list[str]:
    return [type(finder).__module__ for finder in sys.meta_path]


class GatePlugin:
    """Collects outcomes by node id and notices tampering; written out by `write`."""

    def __init__(self, order: str, workspace: str) -> None:
        self.order = order
        self.workspace = workspace
        self.collected: list[str] = []
        self.collect_errors: dict[str, str] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.tamper: list[str] = []
        self._builtins = dict(vars(builtins))
        self._meta_path = list(sys.meta_path)
        # Taken before pytest starts: initial conftests (and what they import) load before
        # pytest_configure, so a snapshot there could already be tampered with.
        self._report_factory = TestReport.__dict__["from_item_and_call"]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors[report.nodeid or "<session>"] = str(report.longrepr)[-2000:]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.order == "reverse":
            items.reverse()
        self.collected = [item.nodeid for item in items]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        if call.excinfo is not None and call.when == "call":
            entry = self.outcomes.setdefault(item.nodeid, {})
            entry["exc_type"] = call.excinfo.typename
            entry["assertion"] = bool(
                call.excinfo.errisinstance(AssertionError)
                or (call.excinfo.typename == "Failed" and "DID NOT RAISE" in str(call.excinfo.value)))

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
        added = [finder for finder in sys.meta_path if finder not in self._meta_path]
        for finder in added:
            module = sys.modules.get(type(finder).__module__)
            origin = str(getattr(module, "__file__", "") or "")
            if origin.startswith(self.workspace):
                self.tamper.append(f"import hook {type(finder).__name__} installed from {origin}")

    def results(self, exit_code: int) -> dict[str, Any]:
        """Everything the judge needs, marked finished."""
        return {"finished": True, "exit_code": exit_code, "collected": self.collected,
                "collect_errors": self.collect_errors, "outcomes": self.outcomes,
                "tamper": self.tamper}


def main(spec_path: str) -> int:
    """Run pytest as the spec says; write the results file last."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    sys.path[:0] = spec["paths"]
    cov = None
    if spec["coverage"]:
        cov = coverage.Coverage(data_file=spec["coverage"]["data_file"],
                                config_file=spec["coverage"]["rcfile"])
        cov.start()
    plugin = GatePlugin(spec["order"], spec["workspace"])
    try:
        code = int(pytest.main(spec["args"], plugins=[plugin]))
    finally:
        if cov is not None:
            cov.stop()
            cov.save()
    Path(spec["results"]).write_text(json.dumps(plugin.results(code)), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
