"""Import-time discipline for S: module and class bodies hold definitions and constants only.

Allowed at module level:
- imports, definitions, docstrings and `...`.
- assignments of static values.
- `if` on a static test (TYPE_CHECKING, `sys.version_info`, `__name__ == "__main__"`).
- `try` around imports for version compatibility.
A static value may call library code (`logging.getLogger(__name__)`, `TypeVar("T")`,
`Field(30, ge=1)`). It may instantiate a class. It may never call a function of S itself. S code
that runs at import time would fake coverage. It could prepare state for the tests. Decorators,
default values and class keywords are import-time code too and follow the same rule.
"""

from __future__ import annotations

import ast

from guardrails.static.astscan import Finding, snippet
from guardrails.static.capabilities import SAFE_BUILTINS, Policy

_STATIC_TESTS = ("TYPE_CHECKING", "version_info", "__name__", "__version__")
_COMPAT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
RULE = "sanitizer.import_time"


class ImportTime:
    """Walks module and class bodies (not function bodies) of one module."""

    def __init__(
        self,
        imports: dict[str, tuple[str, str]],
        policy: Policy,
        functions: set[str],
        classes: set[str],
    ) -> None:
        self.imports, self.policy = imports, policy
        self.functions, self.classes = functions, classes
        self.found: list[Finding] = []

    def add(self, node: ast.AST, detail: str) -> None:
        self.found.append(
            Finding(
                RULE,
                getattr(node, "lineno", 1),
                f"{RULE}:{detail}",
                f"import-time code is limited to definitions and constants: {detail}",
            )
        )

    def body(self, statements: list[ast.stmt], in_class: bool = False) -> None:
        for node in statements:
            self.statement(node, in_class)

    def statement(self, node: ast.stmt, in_class: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
            return
        if isinstance(node, _DEFINITIONS):
            self.definition(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # docstrings and `...`
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if node.value is not None:
                self.static(node.value)
        elif isinstance(node, ast.If) and self.static_test(node.test):
            if main_guard(node.test):
                return  # never runs on import
            self.static(node.test)
            self.body(node.body, in_class)
            self.body(node.orelse, in_class)
        elif (
            isinstance(node, ast.Try)
            and not node.finalbody
            and all(_compat_handler(h) for h in node.handlers)
        ):
            self.compat_imports(node.body)
            self.body(node.body, in_class)
            for handler in node.handlers:
                self.body(handler.body, in_class)
            self.body(node.orelse, in_class)
        else:
            self.add(node, f"{type(node).__name__.lower()} statement {snippet(node)[:60]!r}")

    def compat_imports(self, statements: list[ast.stmt]) -> None:
        """The imports a compatibility `try` guards must succeed here.

        The fallback is excluded from coverage. So it must be dead code, never a way to run
        unmeasured code.
        """
        for node in statements:
            if isinstance(node, ast.Import):
                failing = [a.name for a in node.names if not self.policy.resolves(a.name)]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                failing = [
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if not self.policy.resolves(node.module, a.name)
                ]
            else:
                failing = ["a relative import"] if isinstance(node, ast.ImportFrom) else []
            if failing:
                self.add(
                    node,
                    f"the compatibility import of {', '.join(failing)} does not resolve "
                    "here, so its fallback would run unmeasured",
                )

    def definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.static(decorator, decorator=True)
        if isinstance(node, ast.ClassDef):
            for keyword in node.keywords:
                if keyword.arg == "metaclass" and self.own(keyword.value):
                    self.add(keyword.value, f"metaclass {snippet(keyword.value)} of S")
                self.static(keyword.value)
            for base in node.bases:
                self.static(base)
            self.body(node.body, in_class=True)
            return
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.static(default)

    def static_test(self, test: ast.expr) -> bool:
        """An `if` test that depends on nothing but the interpreter and library versions."""
        names = [
            n.id if isinstance(n, ast.Name) else n.attr
            for n in ast.walk(test)
            if isinstance(n, (ast.Name, ast.Attribute))
        ]
        return (
            bool(names)
            and any(name in _STATIC_TESTS for name in names)
            and not any(isinstance(n, ast.Call) for n in ast.walk(test))
        )

    def static(self, value: ast.expr, decorator: bool = False) -> None:
        """Calls inside an import-time expression may run library code or make instances only."""
        stack: list[ast.AST] = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Lambda):
                continue  # its body runs later, when called
            if isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                self.add(node, snippet(node)[:60])
            if (
                isinstance(node, ast.Call)
                and self.own(node.func)
                and not self.instantiates(node.func)
            ):
                self.add(node, f"calls {snippet(node.func)} of S")
            stack.extend(ast.iter_child_nodes(node))
        if (
            decorator
            and not isinstance(value, ast.Call)
            and self.own(value)
            and not self.instantiates(value)
        ):
            self.add(value, f"decorator {snippet(value)} of S runs at import time")

    def own(self, func: ast.AST) -> bool:
        """True when `func` is S code (defined here or imported from S), not library code."""
        while isinstance(func, ast.Attribute):
            func = func.value
        if isinstance(func, ast.Call):
            return self.own(func.func)
        if not isinstance(func, ast.Name):
            return True  # a subscript, a lambda call: not a plain library callable
        target = self.imports.get(func.id)
        if target is not None:
            return self.policy.is_own(target[0])
        return func.id not in SAFE_BUILTINS

    def instantiates(self, func: ast.AST) -> bool:
        """A class of S: defined here, or imported from S under a CapWords name."""
        if isinstance(func, ast.Name):
            return func.id in self.classes or (
                func.id in self.imports and func.id not in self.functions and func.id[:1].isupper()
            )
        return isinstance(func, ast.Attribute) and func.attr[:1].isupper()


def main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _compat_handler(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return all(isinstance(k, ast.Name) and k.id in _COMPAT_ERRORS for k in kinds)


def import_time_findings(
    tree: ast.Module,
    imports: dict[str, tuple[str, str]],
    policy: Policy,
    functions: set[str],
    classes: set[str],
) -> list[Finding]:
    """Findings of the import-time rule over one module (functions and classes it defines)."""
    checker = ImportTime(imports, policy, functions, classes)
    checker.body(tree.body)
    return checker.found
