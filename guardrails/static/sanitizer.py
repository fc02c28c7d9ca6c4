"""The capability sanitizer: S (and T) may reach only what the allow-lists of `capabilities` give.

One pass over the AST does all of this:
- It checks imports against the allowed modules.
- It resolves every attribute chain that starts at an imported module.
- It keeps module objects out of values.
- It limits dunders and reflection to their ordinary literal uses.
- It resolves bare names through Python's scopes. So a builtin outside the safe list (`open`,
  `eval`, `__import__` ...) is refused however it is reached.
Source files additionally keep import-time code to definitions and constants (`importtime`).
Findings present in the old text are not reported again.
"""

from __future__ import annotations

import ast
import gc
import re
from pathlib import Path

from guardrails.static.astscan import Finding, only_new, parse, snippet, to_violations, too_deep
from guardrails.static.capabilities import (
    ESCAPE_ATTRIBUTES,
    EVALUATING_METHODS,
    HOOK_DEFINITIONS,
    IO_METHODS,
    NAMED_REFLECTION,
    PATH_WRITERS,
    PICKLE_KEYWORDS,
    REFLECTION,
    VIEW_WRITES,
    Policy,
    is_dunder,
)
from guardrails.static.importtime import import_time_findings, main_guard
from guardrails.static.scopes import ScopedWalker
from guardrails.static.sourcestate import MESSAGES as STATE_MESSAGES
from guardrails.static.sourcestate import state_findings
from guardrails.static.sourcetext import read_source
from guardrails.verdict import Violation

MESSAGES: dict[str, str] = {
    "sanitizer.encoding": "only UTF-8 source is accepted",
    "sanitizer.source_mismatch": "the gate and the interpreter would read different lines",
    "sanitizer.syntax_error": "the source does not parse",
    "sanitizer.import_not_allowed": "this module is not on the workspace's import allow-list",
    "sanitizer.module_escape": "this reaches beyond the allowed modules",
    "sanitizer.module_value": "a module may only be used as `module.name`, never as a value",
    "sanitizer.dunder": "only the ordinary dunders may be used or defined",
    "sanitizer.reflection": "reflection needs a literal, non-dunder name and never a module",
    "sanitizer.builtin_not_allowed": "this builtin is not available to judged code",
    "sanitizer.io": "strategy code may not read or write files",
    "sanitizer.module_attr_write": "assigning attributes of imported modules patches them",
    "sanitizer.always_equal": "an object that equals anything defeats every assertion",
    "sanitizer.answer_table": "hard-coded outputs for specific inputs special-case the tests",
    "sanitizer.code_in_string": "a string that libraries may evaluate holds code",
    "sanitizer.type_checking": "TYPE_CHECKING must be typing's constant, with no else branch",
    "sanitizer.import_time": "import-time code is limited to definitions and constants",
    "sanitizer.source_import": "tests reach strategy code only through strategy_host: S never runs "
    "in the test process",
    **STATE_MESSAGES,
}
_FORMAT_DUNDER = re.compile(r"\{[^{}:!]*__")
# Dunders whose constant answer makes any object pass a check: name -> the answer that cheats.
ANSWERS_EVERYTHING = {"__eq__": True, "__ne__": False, "__contains__": True}


class Scanner(ScopedWalker):
    """Findings over one parsed module under one policy (`role` source or tests)."""

    def __init__(self, tree: ast.Module, policy: Policy, package: str = "") -> None:
        super().__init__(tree)
        self.policy, self.package = policy, package
        self.found: list[Finding] = []
        self.imports: dict[str, tuple[str, str]] = {}  # local name -> (target, module|object)
        self.heads: set[int] = set()  # Name nodes heading an attribute chain or a call
        self.inner: set[int] = set()  # Attribute nodes inside a longer chain
        self.blessed: set[int] = set()  # `object.__setattr__` in the frozen-dataclass idiom
        self.called: set[int] = set()  # function expressions of calls
        self.functions: set[str] = set()
        self.classes: set[str] = set()
        # the policy's sets, computed once: visit_Name runs for every name in the module
        self.denied, self.dunders = policy.denied_builtins, policy.dunders

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.found.append(
            Finding(
                rule,
                getattr(node, "lineno", 1),
                f"{rule}:{detail}",
                f"{MESSAGES.get(rule, rule)}: {detail}",
            )
        )

    # -- traversal ---------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        self.walk()
        for name, node in self.unbound_builtins():
            self.add("sanitizer.builtin_not_allowed", node, name)
        return self.found

    def _source_import(self, node: ast.AST, module: str | None) -> bool:
        """Tests importing S (it is not in their process: they call it through strategy_host)."""
        if (
            self.policy.role != "tests"
            or not module
            or module.split(".")[0] not in self.policy.sources
        ):
            return False
        self.add("sanitizer.source_import", node, module)
        return True

    def visit_Import(self, node: ast.Import, scope: int) -> None:
        for alias in node.names:
            if self._source_import(node, alias.name):
                continue
            if not self.policy.allows(alias.name):
                self.add("sanitizer.import_not_allowed", node, alias.name)
            local = alias.asname or alias.name.split(".")[0]
            own = self.policy.is_own(alias.name)  # S's own modules are ordinary values
            self.imports[local] = (
                alias.name if alias.asname else local,
                "object" if own else "module",
            )
            self._bind(local, scope)

    def visit_ImportFrom(self, node: ast.ImportFrom, scope: int) -> None:
        module = self._absolute(node)
        if module == "__future__" or self._source_import(node, module):
            return
        if module is None or not self.policy.allows(module):
            self.add("sanitizer.import_not_allowed", node, module or "." * node.level)
            return
        for alias in node.names:
            if alias.name == "*":
                self.add("sanitizer.import_not_allowed", node, f"from {module} import *")
                continue
            problem = self.policy.chain_problem(module, [alias.name])
            if problem:
                self.add("sanitizer.module_escape", node, problem)
            local = alias.asname or alias.name
            self.imports[local] = self.policy.imported(module, alias.name)
            self._bind(local, scope)

    def _absolute(self, node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module or ""
        parts = self.package.split(".") if self.package else []
        if node.level > len(parts):
            return None  # climbs out of the package tree
        base = parts[: len(parts) - node.level + 1]
        return ".".join([*base, *([node.module] if node.module else [])])

    # -- names and attributes ----------------------------------------------------------------
    def visit_Name(self, node: ast.Name, scope: int) -> None:
        name = node.id
        if not isinstance(node.ctx, ast.Load):
            self._bind(name, scope)
            if name == "TYPE_CHECKING":
                self.add("sanitizer.type_checking", node, "TYPE_CHECKING is assigned")
            return
        target = self.imports.get(name)
        if target is not None:
            if target[1] == "module" and id(node) not in self.heads:
                self.add("sanitizer.module_value", node, name)
            if target[0] in NAMED_REFLECTION and id(node) not in self.called:
                self.add("sanitizer.reflection", node, f"{name} used as a value")
        if is_dunder(name) and name not in self.dunders:
            self.add("sanitizer.dunder", node, name)
        if name in self.denied:
            self.builtins.append((name, scope, node))
        elif name in REFLECTION and id(node) not in self.heads:
            self.add("sanitizer.reflection", node, f"{name} used as a value")
        if name == "TYPE_CHECKING" and self.imports.get(name, ("", ""))[0] not in (
            "typing.TYPE_CHECKING",
            "typing_extensions.TYPE_CHECKING",
        ):
            self.add("sanitizer.type_checking", node, "TYPE_CHECKING is not typing's")

    def visit_Attribute(self, node: ast.Attribute, scope: int) -> None:
        attribute = node.attr
        if is_dunder(attribute) and (
            attribute not in self.dunders
            or (attribute == "__setattr__" and id(node) not in self.blessed)
        ):
            self.add("sanitizer.dunder", node, snippet(node))
        if attribute in ESCAPE_ATTRIBUTES or (
            attribute in VIEW_WRITES and self.policy.role == "source"
        ):
            self.add("sanitizer.module_escape", node, snippet(node))
        if attribute in IO_METHODS and self.policy.role == "source":
            self.add("sanitizer.io", node, snippet(node))
        if id(node) in self.inner:
            return
        parts = [attribute]
        base: ast.AST = node.value
        while isinstance(base, ast.Attribute):
            self.inner.add(id(base))
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            self.heads.add(id(base))
            target = self.imports.get(base.id)
            if (
                target is not None
                and f"{target[0]}.{attribute}" in NAMED_REFLECTION
                and len(parts) == 1
                and id(node) not in self.called
            ):
                self.add("sanitizer.reflection", node, f"{snippet(node)} used as a value")
            if target is not None and target[1] == "module":
                problem = self.policy.chain_problem(target[0], parts[::-1])
                if problem:
                    self.add("sanitizer.module_escape", node, problem)

    # -- calls -------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call, scope: int) -> None:
        func = node.func
        self.called.add(id(func))
        if isinstance(func, ast.Name):
            self.heads.add(id(func))
        name = self._callee(func)
        if name in REFLECTION:
            self._literal_reflection(node, name, node.args[1:2], node.args[:1])
        elif name in NAMED_REFLECTION:
            names = node.args if name.endswith("attrgetter") else node.args[:1]
            self._literal_reflection(node, name, names, [], dotted=True)
        elif isinstance(func, ast.Attribute) and func.attr == "__setattr__":
            self._setattr_idiom(node, func)
        elif isinstance(func, ast.Attribute) and func.attr in ("format", "format_map"):
            template = func.value
            if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
                self.add("sanitizer.reflection", node, f"{snippet(func)} on a computed template")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in EVALUATING_METHODS
            and not (
                node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            )
        ):
            self.add("sanitizer.reflection", node, f"{snippet(func)} of a computed expression")
        for keyword in node.keywords:
            if keyword.arg in PICKLE_KEYWORDS and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                self.add("sanitizer.module_escape", node, f"{keyword.arg}= runs a pickle's code")
        if (
            isinstance(func, ast.Attribute)
            and func.attr in PATH_WRITERS
            and (node.args or node.keywords)
            and self.policy.role == "source"
        ):
            self.add("sanitizer.io", node, snippet(func))

    def _callee(self, func: ast.AST) -> str:
        if isinstance(func, ast.Name):
            return self.imports.get(func.id, (func.id, ""))[0]
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            head = self.imports.get(func.value.id, (func.value.id, ""))[0]
            return f"{head}.{func.attr}"
        return ""

    def _literal_reflection(
        self,
        node: ast.Call,
        name: str,
        names: list[ast.expr],
        objects: list[ast.expr],
        dotted: bool = False,
    ) -> None:
        literal = bool(names) and all(
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and not any(
                is_dunder(part) or not part
                for part in (n.value.split(".") if dotted else [n.value])
            )
            for n in names
        )
        on_module = any(
            isinstance(o, ast.Name) and self.imports.get(o.id, ("", ""))[1] == "module"
            for o in objects
        )
        if not literal or on_module or node.keywords:
            self.add("sanitizer.reflection", node, snippet(node))
            return
        # a literal name is the attribute itself: `getattr(gen, "gi_frame")` is `gen.gi_frame`
        parts = {part for n in names for part in str(getattr(n, "value", "")).split(".")}
        if parts & ESCAPE_ATTRIBUTES or (parts & VIEW_WRITES and self.policy.role == "source"):
            self.add("sanitizer.module_escape", node, snippet(node))
        if parts & IO_METHODS and self.policy.role == "source":
            self.add("sanitizer.io", node, snippet(node))

    def _setattr_idiom(self, node: ast.Call, func: ast.Attribute) -> None:
        """`object.__setattr__(self, "x", v)` / `super().__setattr__("x", v)` only."""
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id == "object":
            names, first = node.args[1:2], node.args[:1]
            ok = bool(first) and isinstance(first[0], ast.Name) and first[0].id == "self"
        else:
            names = node.args[:1]
            ok = (
                isinstance(owner, ast.Call)
                and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"
            )
        literal = (
            bool(names)
            and isinstance(names[0], ast.Constant)
            and isinstance(names[0].value, str)
            and not is_dunder(names[0].value)
        )
        if ok and literal and len(node.args) == (3 if isinstance(owner, ast.Name) else 2):
            self.blessed.add(id(func))
        else:
            self.add("sanitizer.reflection", node, snippet(node))

    # -- constants, definitions, writes -------------------------------------------------------
    def visit_Constant(self, node: ast.Constant, scope: int) -> None:
        value = node.value
        if not isinstance(value, str):
            return
        if is_dunder(value) and value not in ("__main__", "__init__", "__post_init__"):
            self.add("sanitizer.dunder", node, repr(value))
        elif _FORMAT_DUNDER.search(value):
            self.add("sanitizer.dunder", node, f"format field in {value[:40]!r}")
        elif value in PICKLE_KEYWORDS:
            self.add("sanitizer.module_escape", node, f"{value!r} runs a pickle's code")
        elif (
            "(" in value
            or "__" in value
            or ("." in value and value.partition(".")[0] in self.imports)
        ):
            # pydantic and typing evaluate string annotations and forward references in the
            # module's namespace. "pydantic.ImportString" is that member.
            self._code_in_string(node, value)

    def _code_in_string(self, node: ast.Constant, value: str) -> None:
        try:
            expression = ast.parse(value.replace("@", "").replace("`", ""), mode="eval")
        except (SyntaxError, ValueError, RecursionError):
            return
        inner = Scanner(
            ast.Module(body=[ast.Expr(expression.body)], type_ignores=[]), self.policy, self.package
        )
        inner.imports = dict(self.imports)
        if inner.run():
            self.add("sanitizer.code_in_string", node, repr(value[:60]))

    def visit_If(self, node: ast.If, scope: int) -> None:
        test = node.test
        guard = (
            isinstance(test, ast.Name)
            and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute)
            and test.attr == "TYPE_CHECKING"
            or main_guard(test)
        )
        if guard and node.orelse:
            self.add(
                "sanitizer.type_checking",
                node,
                f"`if {snippet(test)}:` has an else branch, which coverage would not count",
            )

    def visit_FunctionDef(self, node: ast.FunctionDef, scope: int) -> None:
        self._bind(node.name, scope)
        self.functions.add(node.name)
        if node.name in HOOK_DEFINITIONS:
            self.add("sanitizer.dunder", node, f"defines {node.name}")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef, scope: int) -> None:
        self._bind(node.name, scope)
        self.classes.add(node.name)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._equality(item)

    def _equality(self, item: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        wanted = ANSWERS_EVERYTHING.get(item.name)
        if wanted is None and item.name != "__hash__":
            return
        returns = [n.value for n in ast.walk(item) if isinstance(n, ast.Return)]
        constants = [n.value for n in returns if isinstance(n, ast.Constant)]
        if (
            returns
            and len(constants) == len(returns)
            and (item.name == "__hash__" or all(bool(c) is wanted for c in constants))
        ):
            self.add("sanitizer.always_equal", item, f"{item.name} returns a constant")

    def _writes(self, targets: list[ast.expr], node: ast.AST) -> None:
        for target in targets:
            base = target
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if (
                base is not target
                and isinstance(base, ast.Name)
                and self.imports.get(base.id, ("", ""))[1] == "module"
            ):
                self.add("sanitizer.module_attr_write", node, snippet(target))

    def visit_Assign(self, node: ast.Assign, scope: int) -> None:
        self._writes(node.targets, node)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign, scope: int) -> None:
        self._writes([node.target], node)

    visit_AnnAssign = visit_AugAssign

    def visit_Delete(self, node: ast.Delete, scope: int) -> None:
        self._writes(node.targets, node)

    def visit_Dict(self, node: ast.Dict, scope: int) -> None:
        keys = [k for k in node.keys if isinstance(k, ast.Tuple)]
        if (
            self.policy.role == "source"
            and len(keys) >= 2
            and len(keys) == len(node.keys)
            and any(isinstance(e, ast.Tuple) for k in keys for e in k.elts)
        ):
            self.add("sanitizer.answer_table", node, f"{len(keys)} answers keyed on literal inputs")


def module_package(path: str) -> str:
    """The package a file of the workspace belongs to ('strategies/x.py' -> 'strategies')."""
    return ".".join(Path(path).parts[:-1])


def findings(path: str, tree: ast.Module, policy: Policy) -> list[Finding]:
    """Every finding of one parsed module (capability rules, and import-time rules for S)."""
    scanner = Scanner(tree, policy, module_package(path))
    found = scanner.run()
    if policy.role == "source":
        found += import_time_findings(
            tree, scanner.imports, policy, scanner.functions, scanner.classes
        )
        found += state_findings(tree, scanner)
    return found


def scan_source(
    path: str,
    new: bytes,
    old: bytes | None,
    policy: Policy,
    allow: frozenset[str] = frozenset(),
    prefix: str = "sanitizer",
) -> list[Violation]:
    """Violations the change from `old` to `new` introduces in one S file."""
    text, refused = read_source(path, new, prefix)
    if text is None:
        return [v for v in refused if v.rule not in allow]
    enabled = gc.isenabled()
    gc.disable()  # the AST is a large burst of small objects: collecting midway only costs time
    try:
        tree, errors = parse(path, text, f"{prefix}.syntax_error")
        if tree is None:
            return [v for v in errors if v.rule not in allow]
        old_text = read_source(path, old, prefix)[0] if old is not None else None
        old_tree = parse(path, old_text, prefix)[0] if old_text is not None else None
        new_found = findings(path, tree, policy)
        old_found = findings(path, old_tree, policy) if old_tree is not None else []
    except RecursionError:
        return too_deep(path, f"{prefix}.syntax_error")
    finally:
        if enabled:
            gc.enable()
    return to_violations(only_new(new_found, old_found), path, set(allow))


def scan_tree(root: Path, policy: Policy | None = None) -> tuple[int, list[Violation]]:
    """Scan every .py file below root as if newly added: (lines scanned, violations). For bench/."""
    policy = policy or Policy.of("source")
    lines = 0
    violations: list[Violation] = []
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        lines += data.count(b"\n")
        violations += scan_source(path.relative_to(root).as_posix(), data, None, policy)
    return lines, violations
