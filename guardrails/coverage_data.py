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
import sys
from pathlib import Path

import coverage
from coverage.sqldata import CoverageData

IMPORT_CONTEXT, SESSION_CONTEXT = "", "session"
# Standard exclusions, fixed by the gate: type-checking-only imports, `...` bodies of overloads and
# protocols, abstract stubs, script entry points, the fallback of a version-compatibility import
# (the sanitizer makes sure the import it guards resolves, so the fallback never runs). Pragmas
# never match (nothing else is excluded).
RCFILE = r"""[run]
branch = True
[report]
exclude_lines =
    ^\s*if\s+(typing\.)?TYPE_CHECKING\s*:
    ^\s*raise\s+NotImplementedError\b
    ^\s*if\s+__name__\s*==\s*['"]__main__['"]\s*:
    ^\s*except\s+\(?\s*(ImportError|ModuleNotFoundError)\b
    ^\s*\.\.\.\s*$
    ^\s*(async\s+)?def\s+\w+\s*\([^;]*\)\s*(->\s*[^:;=]+)?:\s*\.\.\.\s*(\#.*)?$
partial_branches = oomrl-gate-never-partial-4b1d
"""


def function_body_lines(text: str) -> set[int]:
    """Lines inside function bodies: they must run under a test, not only at import time (a body
    on the `def` line itself, as in `def f(x: int) -> int: ...` stubs, runs with the `def`)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = max(node.body[0].lineno, node.lineno + 1)
            lines.update(range(first, (node.end_lineno or node.lineno) + 1))
    return lines


def version_dead_lines(text: str) -> set[int]:
    """Lines of module-level `if sys.version_info <op> (x, y):` branches this interpreter never
    takes (the other branch of a version-compatibility import)."""
    dead: set[int] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.If) and _version_test(node.test) is not None:
            branch = node.orelse if _version_test(node.test) else node.body
            for statement in branch:
                dead.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return dead


def _version_test(test: ast.expr) -> bool | None:
    """The value of `sys.version_info >= (3, 11)` (any comparison) here, or None for other tests."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and ast.unparse(test.left)
            == "sys.version_info" and isinstance(test.comparators[0], ast.Tuple)):
        return None
    parts = test.comparators[0].elts
    if not all(isinstance(p, ast.Constant) and isinstance(p.value, int) for p in parts):
        return None
    wanted = tuple(p.value for p in parts)  # type: ignore[attr-defined]
    here = tuple(sys.version_info[:len(wanted)])
    compare = {ast.Lt: here < wanted, ast.LtE: here <= wanted, ast.Gt: here > wanted,
               ast.GtE: here >= wanted, ast.Eq: here == wanted, ast.NotEq: here != wanted}
    return compare.get(type(test.ops[0]))


def map_data(data_file: Path, target: Path, inside: str, host: Path) -> Path:
    """Add the child's data to `target` (joined with what it holds), its paths below `inside`
    rewritten below `host`."""
    source = CoverageData(basename=str(data_file), read_only=True)
    source.read()
    prefix = inside.rstrip("/") + "/"
    mapped = CoverageData(basename=str(target))
    if target.exists():
        mapped.read()  # a second part (T's after S's): a first write would erase the file
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

    def branch_percent(self, files: list[Path], dead: dict[Path, set[int]] | None = None) -> float:
        """Branch coverage over `files` (never-imported files count as not covered at all),
        leaving out the `dead` lines: version branches this interpreter never takes."""
        if not files:
            return 100.0
        if not any((dead or {}).values()):
            return float(self.cov.report(morfs=[str(f) for f in files], file=io.StringIO()))
        done = total = 0
        for path in files:
            numbers = self._numbers(path, (dead or {}).get(path, set()))
            done += numbers[0]
            total += numbers[1]
        return 100.0 * done / total if total else 100.0

    def _numbers(self, path: Path, dead: set[int]) -> tuple[int, int]:
        """(covered, total) statements plus branch exits of one file, without `dead` lines."""
        analysis = self.cov._analyze(str(path))
        statements = set(analysis.statements) - dead
        missing = set(analysis.missing) - dead
        exits: dict[int, list[int]] = {}
        for source, target in analysis.arc_possibilities:
            if source > 0 and source not in dead:
                exits.setdefault(source, []).append(target)
        lacking = analysis.missing_branch_arcs()
        branches = missed = 0
        for source, targets in exits.items():
            live = [t for t in targets if t not in dead]
            if len(targets) > 1 and len(live) > 1:
                branches += len(live)
                missed += len([t for t in lacking.get(source, []) if t not in dead])
        return len(statements) - len(missing) + branches - missed, len(statements) + branches

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
