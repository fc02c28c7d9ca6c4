"""AST sanitizer: named rules that flag code which could fool the gate, on what a patch adds to S."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from guardrails.astscan import (
    Finding,
    docstring_ids,
    dotted,
    import_map,
    index,
    only_new,
    parse,
    pragma_findings,
    snippet,
    to_violations,
    too_deep,
)
from guardrails.sanitizer_rules import (
    ANSWERS_EVERYTHING,
    ATTRIBUTE_RULES,
    BUILTIN_NAMES,
    OPENERS,
    READ_METHODS,
    RULE_OF_NAME,
    SOURCE_MESSAGES,
    TEST_MODULE,
    TEST_STRING,
)
from guardrails.testio import WRITE_METHODS
from guardrails.verdict import Violation


class SourceScanner:
    """Collects findings over one parsed module; `disabled` rules and `allowed_modules` are skipped."""

    def __init__(self, tree: ast.Module, disabled: frozenset[str] = frozenset(),
                 allowed_modules: frozenset[str] = frozenset()) -> None:
        self.tree = tree
        self.nodes, self.parent = index(tree)
        self.imports = import_map(self.nodes)
        self.docstrings = docstring_ids(self.nodes)
        self.disabled = disabled
        self.allowed = allowed_modules
        self.found: list[Finding] = []

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        if rule not in self.disabled:
            line = getattr(node, "lineno", 1)
            key = f"{detail} in {self.statement_key(node)}"
            self.found.append(Finding(rule, line, key, f"{SOURCE_MESSAGES[rule]}: {detail}"))

    def statement_key(self, node: ast.AST) -> str:
        """The statement a finding sits in (or the header part of a compound statement), so that an
        old finding moved into new code counts as new."""
        child = node
        while not isinstance(child, ast.stmt):  # every expression lies inside some statement
            parent = self.parent[id(child)]
            if isinstance(parent, ast.stmt) and hasattr(parent, "body"):
                return f"{type(parent).__name__}: {snippet(child)}"
            child = parent
        return type(child).__name__ if hasattr(child, "body") else snippet(child)

    def banned(self, name: str, node: ast.AST) -> None:
        parts = name.split(".")
        heads = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(head in self.allowed for head in heads):
            return
        for head in heads:
            if head in RULE_OF_NAME:
                self.add(RULE_OF_NAME[head], node, name)
                return

    def run(self) -> list[Finding]:
        for node in self.nodes:
            handler = getattr(self, f"visit_{type(node).__name__}", None)
            if handler is not None:
                handler(node)
        self.module_level_calls()
        return self.found

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.banned(alias.name, node)
            self.test_code(alias.name.split("."), node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0 and module != "__future__":
            self.banned(module, node)
            for alias in node.names:
                self.banned(f"{module}.{alias.name}", node)
        parts = module.split(".") if module else []
        self.test_code(parts + [alias.name for alias in node.names], node)

    def test_code(self, parts: list[str], node: ast.AST) -> None:
        """Importing test modules (absolute or relative) lets source read what the tests expect."""
        if any(TEST_MODULE.match(part) for part in parts):
            self.add("sanitizer.imports_tests", node, snippet(node))

    def imported_root(self, node: ast.AST) -> bool:
        """True when the chain `node` starts at a name bound by an import."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.imports

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(self.parent.get(id(node)), ast.Attribute):
            return
        if node.id in self.imports:
            self.banned(self.imports[node.id], node)
        elif node.id in BUILTIN_NAMES:
            self.banned(node.id, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        rule = ATTRIBUTE_RULES.get(node.attr)
        if rule is not None:
            self.add(rule, node, snippet(node))
        if isinstance(self.parent.get(id(node)), ast.Attribute):
            return  # only the longest chain is checked against the banned names
        name = dotted(node, self.imports)
        if name is not None and (self.imported_root(node) or name.split(".")[0] in BUILTIN_NAMES):
            self.banned(name, node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if (isinstance(node.value, str) and id(node) not in self.docstrings
                and TEST_STRING.search(node.value)):
            self.add("sanitizer.test_env", node, repr(node.value))

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func, self.imports)
        if name in ("getattr", "setattr", "delattr", "hasattr") and node.args:
            computed = len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)
            if computed or self.imported_root(node.args[0]):
                self.add("sanitizer.reflection", node, snippet(node))
        elif name == "locals" and isinstance(self.parent.get(id(node)), (ast.Subscript, ast.Attribute)):
            self.add("sanitizer.namespace", node, snippet(self.parent[id(node)]))
        elif name in OPENERS or (isinstance(node.func, ast.Attribute) and node.func.attr == "open"):
            position = 1 if name in OPENERS else 0  # Path.open(mode) vs open(file, mode)
            mode = node.args[position] if len(node.args) > position else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            writes = mode is not None and not (isinstance(mode, ast.Constant) and isinstance(
                mode.value, str) and not set(mode.value) & set("wax+"))
            self.add("sanitizer.file_write" if writes else "sanitizer.file_read", node, snippet(node))
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method in WRITE_METHODS and (node.args or node.keywords or not method.startswith("to_")):
                self.add("sanitizer.file_write", node, snippet(node.func))
            elif method in READ_METHODS:
                self.add("sanitizer.file_read", node, snippet(node.func))
            elif re.match(r"os\.(exec|spawn)", name or ""):
                self.add("sanitizer.subprocess", node, name)

    def _attribute_targets(self, targets: list[ast.expr], node: ast.AST) -> None:
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute):
                    root = sub
                    while isinstance(root, ast.Attribute):
                        root = root.value  # type: ignore[assignment]
                    if isinstance(root, ast.Name) and root.id in self.imports:
                        self.add("sanitizer.module_attr_write", node, snippet(target))
                        break

    def visit_Assign(self, node: ast.Assign) -> None:
        self._attribute_targets(node.targets, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._attribute_targets([node.target], node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._attribute_targets([node.target], node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._attribute_targets(node.targets, node)

    def visit_Dict(self, node: ast.Dict) -> None:
        """A table keyed on whole literal inputs (tuples of tuples) is a list of memorised answers."""
        keys = [k for k in node.keys if isinstance(k, ast.Tuple)]
        if len(keys) >= 2 and len(keys) == len(node.keys) and any(
                isinstance(e, ast.Tuple) for k in keys for e in k.elts):
            self.add("sanitizer.answer_table", node, f"{len(keys)} answers keyed on literal inputs")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns = [n.value for n in ast.walk(item) if isinstance(n, ast.Return)]
                last = item.body[-1]
                falls_to = last.value if isinstance(last, ast.Return) else None
                self._equality(item.name, returns, falls_to, item)
            elif isinstance(item, ast.Assign) and isinstance(item.value, ast.Lambda):
                for name in [t.id for t in item.targets if isinstance(t, ast.Name)]:
                    self._equality(name, [item.value.body], item.value.body, item)

    def _equality(self, name: str, returns: list[ast.expr | None], last: ast.expr | None,
                  node: ast.AST) -> None:
        constants = [_constant(r) for r in returns]
        wanted = ANSWERS_EVERYTHING.get(name)
        if wanted is not None and returns and (
                all(c is not _UNKNOWN and bool(c) is wanted for c in constants)
                or (last is not None and _constant(last) is not _UNKNOWN and bool(_constant(last)) is wanted)):
            self.add("sanitizer.always_equal", node, f"{name} returns {wanted}")
        elif name == "__hash__" and returns and _UNKNOWN not in constants:
            self.add("sanitizer.always_equal", node, "__hash__ returns a constant")

    def module_level_calls(self) -> None:
        """Calls at import time to functions this module defines (they fake coverage of the body)."""
        own = {n.name for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for statement in self.tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(statement, ast.If) and "__main__" in ast.unparse(statement.test):
                continue
            for node in _walk_outside_lambdas(statement):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in own):
                    self.add("sanitizer.import_time_call", node, snippet(node))


_UNKNOWN = object()


def _constant(node: ast.AST | None) -> object:
    """The value of a constant expression (`True`, `1`, `not False`), else _UNKNOWN."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _constant(node.operand)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    return _UNKNOWN


def _walk_outside_lambdas(node: ast.AST) -> list[ast.AST]:
    """Nodes below `node` that run when it runs (lambda bodies do not)."""
    nodes: list[ast.AST] = []
    stack = [node]
    while stack:
        current = stack.pop()
        nodes.append(current)
        if not isinstance(current, ast.Lambda):
            stack.extend(ast.iter_child_nodes(current))
    return nodes


def source_findings(text: str, disabled: frozenset[str] = frozenset(),
                    allowed_modules: frozenset[str] = frozenset(),
                    tree: ast.Module | None = None) -> list[Finding]:
    """All findings of a parseable module (AST rules plus coverage-exclusion comments)."""
    tree = tree or ast.parse(text)
    return SourceScanner(tree, disabled, allowed_modules).run() + pragma_findings(
        text, "sanitizer.pragma")


def scan_source(path: str, new_text: str, old_text: str | None, allow: set[str]) -> list[Violation]:
    """Violations the change from old_text to new_text introduces (non-.py paths: see diffs)."""
    if not path.endswith(".py"):
        return []  # non-Python files in S are rejected by diffs.check_patch (diff.non_python_source)
    tree, errors = parse(path, new_text, "sanitizer.syntax_error")
    if tree is None:
        return [e for e in errors if e.rule not in allow]
    old_tree = parse(path, old_text, "sanitizer.syntax_error")[0] if old_text is not None else None
    try:
        new = source_findings(new_text, tree=tree)
        old = source_findings(old_text or "", tree=old_tree) if old_tree is not None else []
    except RecursionError:
        return [v for v in too_deep(path, "sanitizer.syntax_error") if v.rule not in allow]
    return to_violations(only_new(new, old), path, allow)


def scan_tree(root: Path) -> tuple[int, list[Violation]]:
    """Scan every .py file below root as if newly added: (lines scanned, violations). For bench/."""
    lines = 0
    violations: list[Violation] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines += text.count("\n")
        violations += scan_source(str(path.relative_to(root)), text, None, set())
    return lines, violations
