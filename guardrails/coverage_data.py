"""Coverage as the judge reads it: the gate's own rcfile and exclusions, data mapped to host paths.

The child measures with `RCFILE` (branch coverage, no pragma honoured, only the standard
exclusions below, which no workspace file can extend) and the gate's plugin switches the
coverage context itself: "" while modules are imported and tests collected, the test's node id
while it runs, "session" in between. So "ran only at import time" comes from the gate's own
context switching, which code under test cannot reach.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import coverage
from coverage.sqldata import CoverageData

IMPORT_CONTEXT, SESSION_CONTEXT = "", "session"
# Standard exclusions, fixed by the gate: type-checking-only imports, `...` bodies of overloads and
# protocols, abstract stubs, script entry points. Pragmas never match (nothing else is excluded).
RCFILE = r"""[run]
branch = True
[report]
exclude_lines =
    ^\s*if\s+(typing\.)?TYPE_CHECKING\s*:
    ^\s*raise\s+NotImplementedError\b
    ^\s*if\s+__name__\s*==\s*['"]__main__['"]\s*:
    ^\s*\.\.\.\s*$
partial_branches = oomrl-gate-never-partial-4b1d
"""


def function_body_lines(text: str) -> set[int]:
    """Lines inside function bodies: they must run under a test, not only at import time."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def map_data(data_file: Path, target: Path, inside: str, host: Path) -> Path:
    """Copy the child's data to `target`, its paths below `inside` rewritten below `host`."""
    source = CoverageData(basename=str(data_file), read_only=True)
    source.read()
    prefix = inside.rstrip("/") + "/"
    mapped = CoverageData(basename=str(target))
    mapped.update(source, map_path=lambda path: str(host) + "/" + path[len(prefix):]
                  if path.startswith(prefix) else path)
    mapped.write()
    return target


class CoverageReader:
    """Reads mapped coverage data in the judging process, with the gate's rcfile."""

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
        """Statements of `path` never executed (excluded lines are not statements)."""
        return set(self.cov.analysis2(str(path))[3])

    def contexts(self, path: Path) -> dict[int, list[str]]:
        """For each executed line, the contexts it ran in ("" = import/collection time)."""
        return dict(self.data.contexts_by_lineno(str(path)))

    def import_time_only(self, path: Path, lines: set[int]) -> set[int]:
        """Of `lines` inside function bodies, those that ran but never inside a test."""
        body = function_body_lines(path.read_text(encoding="utf-8"))
        contexts = self.contexts(path)
        return {line for line in lines & body if line in contexts
                and set(contexts[line]) <= {IMPORT_CONTEXT, SESSION_CONTEXT}}

    def lines_run_by(self, path: Path, nodeids: set[str]) -> set[int]:
        """Lines of `path` executed while one of the tests `nodeids` ran."""
        return {line for line, names in self.contexts(path).items() if set(names) & nodeids}
