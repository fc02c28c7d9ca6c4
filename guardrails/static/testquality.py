"""Test-quality rules for test-gen patches: new tests must assert something real and must not
cheat."""

from __future__ import annotations

import ast
import dataclasses
import gc
import sys
from collections.abc import Iterator
from pathlib import Path

from guardrails.static.astscan import (
    Finding,
    dotted,
    import_map,
    only_new,
    parse,
    snippet,
    to_violations,
    too_deep,
    under,
)
from guardrails.static.capabilities import Policy
from guardrails.static.discipline import discipline_findings
from guardrails.static.sanitizer import findings as capability_findings
from guardrails.static.sourcetext import read_source
from guardrails.static.testio import (
    TMP_NAMES,
    inside_tmp,
    tainted_names,
    tmp_fixtures,
    write_targets,
)
from guardrails.static.weakening import weakened_findings
from guardrails.verdict import Violation

SOURCE_PACKAGES = ("strategies",)
# The client tests reach S through.
# Replacing it (or its channel) mocks S as surely as patching S.
HOST_CLIENT = "strategy_host"
RECONNECTS = frozenset(
    {"strategy_host.connect", "strategy_host.connect_lazily", "strategy_host.set_context"}
)
SKIPS = (
    "pytest.mark.skip",
    "pytest.mark.skipif",
    "pytest.mark.xfail",
    "pytest.skip",
    "pytest.xfail",
    "pytest.importorskip",
    "pytest.exit",
    "unittest.skip",
    "unittest.skipIf",
    "unittest.skipUnless",
    "unittest.expectedFailure",
    "unittest.SkipTest",
    "unittest.case.SkipTest",
)
SKIP_ATTRIBUTES = frozenset({"skipTest", "applymarker", "add_marker"})
RAISES = ("pytest.raises", "pytest.warns", "pytest.deprecated_call")
PATCHERS = frozenset(
    {
        "patch",
        "object",
        "dict",
        "multiple",
        "setattr",
        "delattr",
        "setitem",
        "delitem",
        "setenv",
        "patch.object",
    }
)
BROAD = frozenset({"Exception", "BaseException", "AssertionError"})
WEAK_CALLS = frozenset({"callable", "hasattr", "type"})
BUILTIN_TYPES = frozenset(
    {
        "dict",
        "list",
        "tuple",
        "set",
        "frozenset",
        "str",
        "bytes",
        "int",
        "float",
        "bool",
        "complex",
        "object",
        "Mapping",
        "Sequence",
        "Iterable",
    }
)
MESSAGES = {
    "tests.no_assert": "the test asserts nothing real (assert, pytest.raises, pytest.approx in "
    "assert)",
    "tests.tautology": "the assertion cannot fail",
    "tests.swallowed_assertion": "an except clause swallows assertion failures",
    "tests.early_return": "a return in a test skips the checks after it",
    "tests.skip": "skips, xfails and collection switches are not allowed",
    "tests.pytest_hook": "tests may not define pytest hooks or plugins",
    "tests.autouse_patch": "autouse fixtures may not patch anything",
    "tests.mock_unit": "tests may not mock or patch the code under test",
    "tests.io_outside_tmp": "tests may write files only below tmp_path",
}


class TestScanner:
    """Findings over one parsed test module; `source_packages` name the code under test."""

    def __init__(self, tree: ast.Module, source_packages: tuple[str, ...]) -> None:
        self.tree = tree
        self.imports = import_map(ast.walk(tree))
        self.sources = (*source_packages, HOST_CLIENT)
        self.found: list[Finding] = []
        self.helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.collected = {id(function) for _, function in _tests_in(tree)}
        self.tmp_fixtures = tmp_fixtures(tree, self.is_fixture)

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        line = getattr(node, "lineno", 1)
        self.found.append(Finding(rule, line, detail, f"{MESSAGES[rule]}: {detail}"))

    def name(self, node: ast.AST) -> str:
        return dotted(node.func if isinstance(node, ast.Call) else node, self.imports) or ""

    def is_source(self, node: ast.AST) -> bool:
        """True for a string naming the code under test.

        Also true for a chain rooted in an import of it.
        """
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return under(node.value, self.sources) is not None
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        bound = self.imports.get(node.id, "") if isinstance(node, ast.Name) else ""
        return under(bound, self.sources) is not None

    # --- assertions -----------------------------------------------------------------------
    def tautology(self, test: ast.AST) -> str | None:
        text = snippet(test)
        if isinstance(test, ast.Constant):
            return text if test.value else None
        if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.JoinedStr, ast.Lambda)):
            return (
                text
                if not isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict))
                or (test.keys if isinstance(test, ast.Dict) else test.elts)
                else None
            )
        if isinstance(test, ast.BoolOp):
            constant = [v for v in test.values if isinstance(v, ast.Constant)]
            if isinstance(test.op, ast.Or) and any(c.value for c in constant):
                return text
            parts = [self.tautology(v) for v in test.values]
            return text if isinstance(test.op, ast.And) and all(parts) else None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return (
                text if isinstance(test.operand, ast.Constant) and not test.operand.value else None
            )
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, right, op = test.left, test.comparators[0], test.ops[0]
            if any(self.name(side).endswith("ANY") for side in (left, right)):
                return text
            if snippet(left) == snippet(right) and isinstance(
                op, (ast.Eq, ast.Is, ast.LtE, ast.GtE)
            ):
                return text
            if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
                return text
            floor = 0 if isinstance(op, ast.GtE) else -1 if isinstance(op, ast.Gt) else None
            if self.name(left) == "len" and floor is not None and _number(right) <= floor:
                return text
        if isinstance(test, ast.Call) and self.name(test) == "isinstance" and len(test.args) == 2:
            return text if snippet(test.args[1]) == "object" else None
        return None

    def weak(self, test: ast.AST) -> bool:
        """Type and None checks say nothing about behaviour."""
        if isinstance(test, ast.Call) and self.name(test) == "isinstance" and len(test.args) == 2:
            return all(
                snippet(kind) in BUILTIN_TYPES
                for kind in (
                    test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
                )
            )
        if isinstance(test, ast.Call):
            return self.name(test) in WEAK_CALLS
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return isinstance(test.ops[0], ast.IsNot) and snippet(test.comparators[0]) == "None"
        if isinstance(test, ast.BoolOp):
            return all(self.weak(v) for v in test.values)
        return False

    def call_tautology(self, call: ast.Call) -> bool:
        """unittest-style assertions that cannot fail: assertTrue(True), assertEqual(x, x)."""
        method = self.name(call).rsplit(".", 1)[-1]
        if method == "assertTrue" and call.args:
            return self.tautology(call.args[0]) is not None
        if method in ("assertEqual", "assertIs", "assertAlmostEqual") and len(call.args) >= 2:
            return snippet(call.args[0]) == snippet(call.args[1])
        return False

    def assertion_calls(self, call: ast.Call, depth: int) -> bool:
        name = self.name(call)
        if under(name, RAISES):
            return True
        method = name.rsplit(".", 1)[-1]
        if method in self.helpers and depth < 2:
            return self.asserts_something(self.helpers[method], depth + 1)
        if not method.startswith(("assert", "fail")) or self.call_tautology(call):
            return False
        if method == "assertTrue" and call.args:
            return not self.weak(call.args[0])
        return method not in ("assertIsNotNone", "assertIsInstance")

    def asserts_something(self, function: ast.AST, depth: int = 0) -> bool:
        for node in _live_nodes(function):
            if (
                isinstance(node, ast.Assert)
                and not self.tautology(node.test)
                and not self.weak(node.test)
            ):
                return True
            if isinstance(node, ast.Call) and self.assertion_calls(node, depth):
                return True
        return False

    def check_test(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if not self.asserts_something(function):
            self.add("tests.no_assert", function, f"{function.name} has no real assertion")
        for node in _live_nodes(function):
            if isinstance(node, ast.Return):
                self.add("tests.early_return", node, f"{function.name}: {snippet(node)}")
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Assert)
                and self.tautology(node.test)
                or isinstance(node, ast.Call)
                and self.call_tautology(node)
            ):
                self.add("tests.tautology", node, snippet(node))

    # --- whole-file rules -----------------------------------------------------------------
    def broad(self, handler: ast.ExceptHandler) -> bool:
        if handler.type is None:
            return True
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any(self.name(k) in BROAD for k in kinds)

    def check_try(self, node: ast.Try) -> None:
        guarded = ast.Module(body=node.body, type_ignores=[])
        if not self.asserts_something(guarded):
            return
        for handler in node.handlers:
            if self.broad(handler) and not any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
                self.add("tests.swallowed_assertion", handler, snippet(handler)[:80])

    def check_with(self, node: ast.With) -> None:
        for item in node.items:
            call = item.context_expr
            if (
                isinstance(call, ast.Call)
                and self.name(call).endswith("suppress")
                and any(self.name(a) in BROAD for a in call.args)
                and self.asserts_something(ast.Module(body=node.body, type_ignores=[]))
            ):
                self.add("tests.swallowed_assertion", node, snippet(call))

    def check_call(self, node: ast.Call) -> None:
        name = self.name(node)
        method = name.rsplit(".", 1)[-1]
        targets = node.args[:2]  # the object patched, or sys.modules and a module name
        patcher = any(word in name for word in ("patch", "mocker")) or name in (
            "setattr",
            "delattr",
        )
        if (
            method in PATCHERS
            and targets
            and patcher
            and any(map(self.is_source, targets))
            or name in RECONNECTS
        ):
            self.add("tests.mock_unit", node, snippet(node)[:100])

    def check_writes(self, scope: ast.AST, seed: set[str]) -> None:
        """Writes are allowed only to paths built from tmp_path (and not climbing out of it)."""
        tainted = tainted_names(scope, seed)
        for node in ast.walk(scope):
            targets = write_targets(node, self.name(node)) if isinstance(node, ast.Call) else []
            if any(not inside_tmp(target, tainted) for target in targets):
                self.add("tests.io_outside_tmp", node, snippet(node)[:100])

    def is_fixture(self, decorator: ast.AST) -> bool:
        return self.name(decorator) == "pytest.fixture"

    def run(self) -> list[Finding]:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.check_function(node)
            elif isinstance(node, ast.Try):
                self.check_try(node)
            elif isinstance(node, ast.With):
                self.check_with(node)
            elif isinstance(node, ast.Call):
                self.check_call(node)
            elif isinstance(node, (ast.Attribute, ast.Name)):
                self.check_reference(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                self.check_assignment(node)
        module_level = ast.Module(
            body=[
                n
                for n in self.tree.body
                if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            ],
            type_ignores=[],
        )
        self.check_writes(module_level, set())
        return self.found

    def check_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name.startswith("pytest_"):
            self.add("tests.pytest_hook", node, node.name)
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            autouse = (
                call is not None
                and self.name(call) == "pytest.fixture"
                and any(
                    k.arg == "autouse" and getattr(k.value, "value", False) for k in call.keywords
                )
            )
            patches = any(
                isinstance(n, ast.Call) and self.name(n).rsplit(".", 1)[-1] in PATCHERS
                for n in ast.walk(node)
            ) or _assigns_attribute(node)
            if autouse and patches:
                self.add("tests.autouse_patch", node, node.name)
        if id(node) in self.collected:
            self.check_test(node)
        params = {a.arg for a in node.args.args + node.args.kwonlyargs}
        self.check_writes(
            ast.Module(body=node.body, type_ignores=[]), params & (TMP_NAMES | self.tmp_fixtures)
        )

    def check_reference(self, node: ast.Attribute | ast.Name) -> None:
        name = dotted(node, self.imports) or ""
        if under(name, SKIPS) or (isinstance(node, ast.Attribute) and node.attr in SKIP_ATTRIBUTES):
            self.add("tests.skip", node, name or snippet(node))
        elif under(
            name,
            (
                "pytest.hookimpl",
                "pytest.hookspec",
                "pluggy",
                "request.config",
                "request.session",
                "pytestconfig",
            ),
        ):
            self.add("tests.pytest_hook", node, name)

    def check_assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            text = snippet(target)
            if text in ("__test__", "pytestmark") or text.endswith(".__test__"):
                self.add("tests.skip", node, text)
            elif text == "pytest_plugins":
                self.add("tests.pytest_hook", node, text)
            elif isinstance(target, (ast.Attribute, ast.Subscript)) and (
                self.is_source(target) or text.startswith("sys.modules")
            ):
                self.add("tests.mock_unit", node, text)


def _live_nodes(function: ast.AST) -> list[ast.AST]:
    """Nodes of a function that can run when it runs.

    Not nested defs, lambdas or `if False:` blocks.
    """
    nodes: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        nodes.append(node)
        if (
            isinstance(node, (ast.If, ast.While))
            and isinstance(node.test, ast.Constant)
            and not node.test.value
        ):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return nodes


def _number(node: ast.AST) -> float:
    """The value of a numeric literal (`3`, `-1`), or +inf for anything else."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return float("inf")
    return (
        value if isinstance(value, (int, float)) and not isinstance(value, bool) else float("inf")
    )


def _assigns_attribute(function: ast.AST) -> bool:
    return any(
        isinstance(n, (ast.Assign, ast.AugAssign))
        and any(
            isinstance(t, ast.Attribute)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
        for n in ast.walk(function)
    )


def _tests_in(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and (
            node.name.startswith("Test")
            or any(snippet(base).endswith("TestCase") for base in node.bases)
        ):
            for item in node.body:
                if isinstance(item, functions) and item.name.startswith("test"):
                    yield f"{node.name}.{item.name}", item


def _findings(tree: ast.Module, path: str, policy: Policy) -> list[Finding]:
    packages = tuple(sorted(policy.sources))
    return (
        TestScanner(tree, packages).run()
        + capability_findings(path, tree, policy)
        + discipline_findings(tree)
    )


def scan_tests(
    path: str,
    new: bytes,
    old: bytes | None,
    policy: Policy | None = None,
    allow: frozenset[str] = frozenset(),
    superseded: frozenset[str] = frozenset(),
) -> list[Violation]:
    """Violations a test-gen change introduces in one test file.

    Unchanged tests are not re-judged. `superseded` is for red mode. It holds the qualified names of
    the file's old tests the approved mandate names. Each is judged as a red test when changed, not
    as weakened.
    """
    policy = policy or Policy.of("tests")
    text, refused = read_source(path, new, "tests")
    if text is None:
        return [v for v in refused if v.rule not in allow]
    enabled = gc.isenabled()
    gc.disable()
    try:
        tree, errors = parse(path, text, "tests.syntax_error")
        if tree is None:
            return [e for e in errors if e.rule not in allow]
        old_text = read_source(path, old, "tests")[0] if old is not None else None
        old_tree = parse(path, old_text, "tests.syntax_error")[0] if old_text is not None else None
        old_found = _findings(old_tree, path, policy) if old_tree is not None else []
        found = only_new(_findings(tree, path, policy), old_found)
    except RecursionError:
        return [v for v in too_deep(path, "tests.syntax_error") if v.rule not in allow]
    finally:
        if enabled:
            gc.enable()
    if old_tree is not None:
        kept = {function.name for _, function in _tests_in(tree)}  # moving into a class is fine
        found += [
            Finding(
                "tests.removed_test",
                function.lineno,
                name,
                f"test {name} was removed; test-gen may add and strengthen tests, never drop them",
            )
            for name, function in _tests_in(old_tree)
            if function.name not in kept
        ]
        found += weakened_findings(old_tree, tree, superseded)
    return to_violations(found, path, set(allow))


def _multiplicity(function: ast.AST) -> int:
    count = 1
    for decorator in getattr(function, "decorator_list", []):
        if (
            isinstance(decorator, ast.Call)
            and snippet(decorator.func).endswith("mark.parametrize")
            and len(decorator.args) > 1
            and isinstance(decorator.args[1], (ast.List, ast.Tuple))
        ):
            count *= max(len(decorator.args[1].elts), 1)
    return count


def count_tests(data: bytes | str) -> int:
    """Number of test items in a test module, parametrize cases counted.

    0 if it does not parse.
    """
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return 0
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    total = 0
    for qualified, function in _tests_in(tree):
        owner = classes.get(qualified.split(".")[0]) if "." in qualified else None
        total += _multiplicity(function) * (_multiplicity(owner) if owner is not None else 1)
    return total


def sibling_modules(ws: Path, path: str, policy: Policy) -> frozenset[str]:
    """Modules a test file imports as pytest resolves them.

    pytest (prepend mode) puts the test file's base folder on sys.path. That is the first folder
    upward without an __init__.py. So `import helpers` finds helpers.py there. Names of the
    standard library or of an allowed library are left to the library. A sibling never widens what
    such a name may do.
    """
    folder = (ws / path).parent
    while (folder / "__init__.py").is_file() and folder != ws and ws in folder.parents:
        folder = folder.parent
    if folder == ws or ws not in folder.parents or not folder.is_dir():
        return frozenset()  # the workspace root: its own packages are T's already
    names = {entry.stem for entry in folder.glob("*.py")} | {
        entry.name for entry in folder.iterdir() if (entry / "__init__.py").is_file()
    }
    return frozenset(
        name
        for name in names
        if name.isidentifier()
        and name != "conftest"
        and name not in sys.stdlib_module_names
        and name not in policy.modules
        and name not in policy.sources
    )


def with_siblings(policy: Policy, ws: Path, path: str) -> Policy:
    """T's policy for one test file, its sibling modules counted as T's own."""
    siblings = sibling_modules(ws, path, policy)
    return dataclasses.replace(policy, own=policy.own | siblings) if siblings else policy
