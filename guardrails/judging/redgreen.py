"""Red tests must fail by an assertion about values S returns, not by any assertion at all.

The gate's plugin records where each failing test failed (the deepest frame in the test files).
The statement there must assert on S's output. One of these must hold:
- it calls S.
- it names a value computed from a call into S. The test assigns the value. Or a fixture gives
  it, from the same file or from a conftest.py above it.
- it sits in a helper that asserts on its arguments.
- it is a `pytest.raises` block around a call into S ("DID NOT RAISE").
An `assert` is judged by its condition, not its message. Each part of a top-level `and` must
involve S's value. So a docstring phrase cannot ride along with a call into S. Dunder attributes
(`__doc__`, `__class__`...) carry nothing. Nor do the opened strategy's own attributes: `name`,
`params`, `handle`. They are what the test asked for, not what S computes.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path

from guardrails.sandbox import SuiteResult
from guardrails.static import dotted, import_map, under
from guardrails.verdict import Violation

# HostedStrategy's own data: the name and params the test opened it with, and a counter
PROXY_ATTRIBUTES = ("name", "params", "handle")


class SourceValues:
    """Which expressions of one test module carry values computed by S."""

    def __init__(
        self,
        tree: ast.Module,
        packages: tuple[str, ...],
        fixtures: set[str] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        self.imports = import_map(ast.walk(tree))
        self.packages = packages
        self.fixtures = set(fixtures) | source_fixtures(tree, packages)
        self.proxies = self._proxies(tree)

    def _opens(self, node: ast.AST) -> bool:
        """Is `node` an `open_strategy(...)` call (the host's handle on a strategy)?"""
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and (dotted(node.func, self.imports) == "strategy_host.open_strategy")
        )

    def _proxies(self, tree: ast.Module) -> set[str]:
        """Names anywhere in the module bound to an opened strategy, and fixtures returning one."""
        found = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target, value in _bindings(node)
            if isinstance(target, ast.Name) and value is not None and self._opens(value)
        }
        return found | {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any(
                isinstance(n, ast.Return) and n.value is not None and self._opens(n.value)
                for n in ast.walk(node)
            )
        }

    def _opaque(self, node: ast.AST) -> bool:
        """An attribute that says nothing about what S computes.

        That is a dunder, or the opened strategy's own name, params or handle.
        """
        if not isinstance(node, ast.Attribute):
            return False
        if node.attr.startswith("__") and node.attr.endswith("__"):
            return True
        return node.attr in PROXY_ATTRIBUTES and (
            self._opens(node.value)
            or (isinstance(node.value, ast.Name) and node.value.id in self.proxies)
        )

    def _walk(self, node: ast.AST) -> Iterator[ast.AST]:
        """ast.walk without the subtrees of opaque attributes."""
        if self._opaque(node):
            return
        yield node
        for child in ast.iter_child_nodes(node):
            yield from self._walk(child)

    def from_source(self, name: str) -> bool:
        return under(self.imports.get(name, ""), self.packages) is not None

    def calls_source(self, node: ast.AST, tainted: set[str]) -> bool:
        """True when `node` calls into S or reads a value computed by S.

        It may call S directly. Or it may call a helper of the module that returns S's values.
        An example is `def weights(...): return call(...)`.
        """
        for child in self._walk(node):
            if isinstance(child, ast.Name) and (child.id in tainted or self.from_source(child.id)):
                return True
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id in self.fixtures
            ):
                return True
        return False

    def tainted(self, function: ast.AST) -> set[str]:
        """Names in `function` bound (transitively) to values that came from S."""
        args = getattr(function, "args", None)
        params = {a.arg for a in (args.args + args.kwonlyargs)} if args else set()
        names = params & self.fixtures
        assigns = [
            n
            for n in ast.walk(function)
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.For, ast.With))
        ]
        grown = True
        while grown:
            grown = False
            for node in assigns:
                for target, value in _bindings(node):
                    bound = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} - names
                    if bound and self.calls_source(value, names):
                        names |= bound
                        grown = True
        return names


def _bindings(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    if isinstance(node, ast.AnnAssign):
        return [(node.target, node.value)] if node.value is not None else []
    if isinstance(node, ast.For):
        return [(node.target, node.iter)]
    return [
        (item.optional_vars, item.context_expr)
        for item in node.items  # type: ignore[attr-defined]
        if item.optional_vars is not None
    ]


def source_fixtures(tree: ast.Module, packages: tuple[str, ...]) -> set[str]:
    """Functions of a module that return or yield something computed by S (its fixtures)."""
    values = SourceValues.__new__(SourceValues)
    values.imports, values.packages, values.fixtures = import_map(ast.walk(tree)), packages, set()
    values.proxies = values._proxies(tree)
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    while True:  # until no more: a fixture may return what a helper got from S
        found = {
            node.name
            for node in functions
            if any(
                isinstance(n, (ast.Return, ast.Yield))
                and n.value is not None
                and values.calls_source(n.value, values.tainted(node))
                for n in ast.walk(node)
            )
        }
        if found == values.fixtures:
            return found
        values.fixtures = found


def _enclosing(tree: ast.Module, line: int) -> tuple[list[ast.AST], ast.AST | None]:
    """Ancestors (outermost first) of the innermost statement spanning `line`."""
    chain: list[ast.AST] = []
    node: ast.AST = tree
    while True:
        inner = [
            c
            for c in ast.iter_child_nodes(node)
            if isinstance(c, ast.stmt) and c.lineno <= line <= (c.end_lineno or c.lineno)
        ]
        if not inner:
            return chain, chain[-1] if chain else None
        node = inner[0]
        chain.append(node)


def about_source(tree: ast.Module, line: int, values: SourceValues) -> bool:
    """Does the statement at `line` assert on a value S computed?"""
    chain, statement = _enclosing(tree, line)
    if statement is None:
        return False
    function = next(
        (n for n in reversed(chain) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None
    )
    tainted = values.tainted(function) if function is not None else set()
    if function is not None and not function.name.startswith("test"):
        args = function.args
        tainted |= {a.arg for a in args.args + args.kwonlyargs}  # a helper asserting on arguments
    for node in reversed(chain):
        if isinstance(node, ast.With) and any(
            "raises" in ast.unparse(item.context_expr) for item in node.items
        ):
            return any(values.calls_source(child, tainted) for child in node.body)
    if isinstance(statement, ast.Assert):
        return all(values.calls_source(part, tainted) for part in _conjuncts(statement.test))
    return values.calls_source(statement, tainted)


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    """The parts of a top-level `a and b and c` (the whole condition otherwise)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [part for value in test.values for part in _conjuncts(value)]
    return [test]


def _conftest_fixtures(ws: Path, test_file: str, packages: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    folder = (ws / test_file).parent
    while folder == ws or ws in folder.parents:
        conftest = folder / "conftest.py"
        if conftest.is_file():
            with contextlib.suppress(SyntaxError, ValueError):
                found |= source_fixtures(ast.parse(conftest.read_bytes()), packages)
        if folder == ws:
            break
        folder = folder.parent
    return found


def red_violations(
    suite: SuiteResult, new_ids: list[str], ws: Path, packages: tuple[str, ...]
) -> list[Violation]:
    """New tests that failed by an assertion which does not involve S's values."""
    found: list[Violation] = []
    for nodeid in new_ids:
        entry = suite.outcomes.get(nodeid, {})
        if entry.get("outcome") != "failed" or not entry.get("assertion"):
            continue  # judged by outcome_violations
        where = entry.get("where")
        ok = False
        if isinstance(where, list) and len(where) == 2:
            try:
                tree = ast.parse((ws / where[0]).read_bytes())
                values = SourceValues(tree, packages, _conftest_fixtures(ws, where[0], packages))
                ok = about_source(tree, int(where[1]), values)
            except (OSError, SyntaxError, ValueError):
                ok = False
        if not ok:
            found.append(
                Violation(
                    rule="redgreen.not_about_source",
                    path=nodeid.split("::")[0],
                    message=(
                        f"{nodeid}: fails by an assertion that does not "
                        "involve any value the source code returns"
                    ),
                )
            )
    return found
