"""Coverage as the judge reads it: the gate's own rcfile and exclusions, data mapped to host paths.

The child measures with `RCFILE`: branch coverage, no pragma honoured, nothing excluded. No
workspace file can extend it. The judge leaves out only the exact AST forms of `exact_exclusions`.
The gate's plugin switches the coverage context itself. It is "" while modules are imported and
tests collected. It is the test's node id while a test runs, and "session" in between. So "ran
only at import time" comes from the gate's own context switching. Code under test cannot reach it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import coverage
from coverage.sqldata import CoverageData

IMPORT_CONTEXT, SESSION_CONTEXT = "", "session"
# coverage.py excludes by regular expression only (`exclude_lines`, matched against any line's
# text). Take a pattern such as `raise NotImplementedError`. It also excluded an untested wrong
# branch anywhere in a function. The rcfile therefore excludes nothing. Its only pattern matches no
# line. That also switches off coverage's default `# pragma: no cover`. The gate computes the exact
# excluded lines itself from the AST (`exact_exclusions`). When it judges (CoverageReader), it
# leaves them out of the measured data, per file, line by line.
NEVER = "oomrl-gate-never-4b1d"
RCFILE = f"""[run]
branch = True
[report]
exclude_lines = {NEVER}
partial_branches = {NEVER}
"""
_COMPAT_ERRORS = {"ImportError", "ModuleNotFoundError"}
_STUB_DECORATORS = {
    "overload",
    "typing.overload",
    "typing_extensions.overload",
    "abstractmethod",
    "abc.abstractmethod",
}


def exact_exclusions(text: str) -> set[int]:
    """The gate's own exclusions, exact AST forms only (docs/gate.md "Coverage").

    - module-level `if TYPE_CHECKING:` of imports.
    - module-level `if __name__ == "__main__":`.
    - the handler of a module-level `try:` of imports. It is one bare `except ImportError:` (or
      ModuleNotFoundError). It holds imports or `name = constant / other name`.
    - the `raise NotImplementedError` that is the whole body of a method (abstract).
    - the `...` that is the whole body of an `@overload`, an `@abstractmethod` or a Protocol's
      method.
    - version branches never taken.
    """
    tree = ast.parse(text)
    rebound = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    lines = version_dead_lines(text)
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and not node.orelse
            and (
                (_main_guard(node.test) and "__name__" not in rebound)
                or (_type_checking(node.test, tree, rebound) and _only_imports(node.body))
            )
        ):
            lines |= _span(node)
        elif isinstance(node, ast.Try) and _compat_try(node):
            lines |= _span(node.handlers[0])
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        protocol = any(
            ast.unparse(b).split("[")[0].rsplit(".", 1)[-1] == "Protocol" for b in cls.bases
        )
        for method in cls.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines |= _stub_lines(method, protocol)
    for function in (
        n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        lines |= _stub_lines(function, None)
    return lines


def _span(node: ast.AST) -> set[int]:
    return set(range(node.lineno, (node.end_lineno or node.lineno) + 1))  # type: ignore[attr-defined]


def _main_guard(test: ast.expr) -> bool:
    return ast.unparse(test).replace("'", '"') == '__name__ == "__main__"'


def _type_checking(test: ast.expr, tree: ast.Module, rebound: set[str]) -> bool:
    """`typing.TYPE_CHECKING`, or `TYPE_CHECKING` imported from typing and never assigned."""
    if ast.unparse(test) in ("typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"):
        return True
    bound = [
        (n.module if isinstance(n, ast.ImportFrom) else None, a)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
        if (a.asname or a.name) == "TYPE_CHECKING"
    ]
    return (
        isinstance(test, ast.Name)
        and test.id == "TYPE_CHECKING"
        and "TYPE_CHECKING" not in rebound
        and bool(bound)
        and all(m in ("typing", "typing_extensions") and a.asname is None for m, a in bound)
    )


def _only_imports(body: list[ast.stmt]) -> bool:
    return all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)


def _compat_try(node: ast.Try) -> bool:
    """`try:` imports, then one bare `except ImportError:`.

    Its fallback only imports or binds constants or names (`fsum = sum`). The sanitizer checks the
    guarded imports resolve, so the fallback never runs.
    """
    if node.orelse or node.finalbody or len(node.handlers) != 1 or not _only_imports(node.body):
        return False
    handler = node.handlers[0]
    return (
        isinstance(handler.type, ast.Name)
        and handler.type.id in _COMPAT_ERRORS
        and handler.name is None
        and all(
            isinstance(s, (ast.Import, ast.ImportFrom))
            or (
                isinstance(s, ast.Assign)
                and isinstance(s.value, (ast.Constant, ast.Name, ast.Attribute))
                and all(isinstance(t, ast.Name) for t in s.targets)
            )
            for s in handler.body
        )
    )


def _stub_lines(
    function: ast.FunctionDef | ast.AsyncFunctionDef, protocol: bool | None
) -> set[int]:
    """The whole body of a stub. Nothing else.

    That is `...` of an overload, abstract or Protocol method. Or it is the bare `raise
    NotImplementedError` of a method (`protocol` None: not a method).
    """
    body = function.body
    if (
        len(body) == 2
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # the docstring
    if len(body) != 1:
        return set()
    decorators = {ast.unparse(d) for d in function.decorator_list}
    statement = body[0]
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and statement.value.value is Ellipsis
        and (decorators & _STUB_DECORATORS or protocol)
    ):
        # `def f(x: int) -> int: ...`: the `def` line itself, whose exit into the body never runs
        return _span(function) if statement.lineno == function.lineno else _span(statement)
    if isinstance(statement, ast.Raise) and statement.cause is None and protocol is not None:
        raised = statement.exc
        if (
            isinstance(raised, ast.Call)
            and not raised.keywords
            and all(isinstance(a, ast.Constant) for a in raised.args)
        ):
            raised = raised.func  # `raise NotImplementedError("a message")`
        if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
            return _span(statement)
    return set()


def function_body_lines(text: str) -> set[int]:
    """Lines inside function bodies: they must run under a test, not only at import time.

    A body on the `def` line itself runs with the `def`. Stubs such as
    `def f(x: int) -> int: ...` are like that.
    """
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = max(node.body[0].lineno, node.lineno + 1)
            lines.update(range(first, (node.end_lineno or node.lineno) + 1))
    return lines


def version_dead_lines(text: str) -> set[int]:
    """Lines of module-level `if sys.version_info <op> (x, y):` branches never taken here.

    That is the other branch of a version-compatibility import.
    """
    dead: set[int] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.If) and _version_test(node.test) is not None:
            branch = node.orelse if _version_test(node.test) else node.body
            for statement in branch:
                dead.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return dead


def _version_test(test: ast.expr) -> bool | None:
    """The value of `sys.version_info >= (3, 11)` (any comparison) here, or None for other tests."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and ast.unparse(test.left) == "sys.version_info"
        and isinstance(test.comparators[0], ast.Tuple)
    ):
        return None
    parts = test.comparators[0].elts
    if not all(isinstance(p, ast.Constant) and isinstance(p.value, int) for p in parts):
        return None
    wanted = tuple(p.value for p in parts)  # type: ignore[attr-defined]
    here = tuple(sys.version_info[: len(wanted)])
    compare = {
        ast.Lt: here < wanted,
        ast.LtE: here <= wanted,
        ast.Gt: here > wanted,
        ast.GtE: here >= wanted,
        ast.Eq: here == wanted,
        ast.NotEq: here != wanted,
    }
    return compare.get(type(test.ops[0]))


def map_data(data_file: Path, target: Path, inside: str, host: Path) -> Path:
    """Add the child's data to `target`, joined with what it holds.

    Its paths below `inside` are rewritten below `host`.
    """
    source = CoverageData(basename=str(data_file), read_only=True)
    source.read()
    prefix = inside.rstrip("/") + "/"
    mapped = CoverageData(basename=str(target))
    if target.exists():
        mapped.read()  # a second part (T's after S's): a first write would erase the file
    mapped.update(
        source,
        map_path=lambda path: (
            str(host) + "/" + path[len(prefix) :] if path.startswith(prefix) else path
        ),
    )
    mapped.write()
    return target


class CoverageReader:
    """Reads mapped coverage data in the judging process, with the gate's rcfile."""

    def __init__(self, data_file: Path, rcfile: Path) -> None:
        self.cov = coverage.Coverage(data_file=str(data_file), config_file=str(rcfile))
        self.cov.load()
        self.data = self.cov.get_data()
        self._excluded: dict[Path, set[int]] = {}

    def excluded(self, path: Path) -> set[int]:
        """The gate's exact exclusions in `path` (read once)."""
        if path not in self._excluded:
            self._excluded[path] = exact_exclusions(path.read_text(encoding="utf-8"))
        return self._excluded[path]

    def branch_percent(self, files: list[Path], dead: dict[Path, set[int]] | None = None) -> float:
        """Branch coverage over `files`; never-imported files count as not covered at all.

        It leaves out the gate's exclusions and the `dead` lines (version branches never taken).
        """
        if not files:
            return 100.0
        done = total = 0
        for path in files:
            numbers = self._numbers(path, (dead or {}).get(path, set()) | self.excluded(path))
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
        """Statements of `path` never executed, the gate's exclusions left out."""
        return set(self.cov.analysis2(str(path))[3]) - self.excluded(path)

    def contexts(self, path: Path) -> dict[int, list[str]]:
        """For each executed line, the contexts it ran in ("" = import/collection time)."""
        return dict(self.data.contexts_by_lineno(str(path)))

    def import_time_only(self, path: Path, lines: set[int]) -> set[int]:
        """Of `lines` inside function bodies, those that ran but never inside a test."""
        body = function_body_lines(path.read_text(encoding="utf-8"))
        contexts = self.contexts(path)
        return {
            line
            for line in lines & body
            if line in contexts and set(contexts[line]) <= {IMPORT_CONTEXT, SESSION_CONTEXT}
        }

    def lines_run_by(self, path: Path, nodeids: set[str]) -> set[int]:
        """Lines of `path` executed while one of the tests `nodeids` ran."""
        return {line for line, names in self.contexts(path).items() if set(names) & nodeids}
