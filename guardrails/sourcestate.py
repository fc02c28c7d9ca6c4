"""S decides from its inputs alone: no clock, no unseeded randomness, no state kept between calls.

A decision may not depend on the day it runs or on how many calls came before it, because the
gate's runs and a scheduled rebalance differ in exactly those. So in S:
- clock: `date.today()`, `datetime.now()`/`utcnow()`/`today()`, `pd.Timestamp.now()`/`today()`,
  `pd.Timestamp("now")`, `pd.to_datetime("today")`, `np.datetime64("now")` ... are refused;
- randomness: `np.random.<function>` (the global generator) and `default_rng()` without a seed;
- state: `global`/`nonlocal`; outside `__init__`/`__post_init__`/`__new__`, no write to an
  attribute or item of `self`, `cls`, a class or a module-level name (nor a mutating call on one,
  nor `setattr` on them); no mutable default argument (it lives across calls).
Cross-validation recomputes sampled decisions in fresh hosts, for what static rules cannot see.
"""

from __future__ import annotations

import ast

from guardrails.astscan import Finding, dotted, import_map, snippet
from guardrails.testrules import CLOCK, MUTATORS, SEEDED, _base_name, _module_mutables, _scope_nodes

MESSAGES = {
    "sanitizer.clock": "strategy code may not read the clock or unseeded randomness",
    "sanitizer.stateful": "strategy code may not keep state between calls",
}
# Constructors that read the clock when given one of these strings.
CLOCK_PARSERS = frozenset({"pandas.Timestamp", "pandas.to_datetime", "pandas.Period", "numpy.datetime64",
                           "datetime.datetime.fromisoformat", "pandas.DatetimeIndex",
                           "pandas.date_range", "pandas.bdate_range"})
CLOCK_WORDS = frozenset({"now", "today", "tomorrow", "yesterday"})
INITIALIZERS = frozenset({"__init__", "__post_init__", "__new__"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _clock_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
        node.value.strip().lower() in CLOCK_WORDS


def _mutable_default(node: ast.AST) -> bool:
    return isinstance(node, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("list", "dict", "set", "bytearray"))


class StateRules:
    """The clock, randomness and state rules over one parsed S module."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports = import_map(ast.walk(tree))
        self.found: list[Finding] = []
        self.module_names = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                             for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                             if isinstance(t, ast.Name)} | _module_mutables(tree)
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.found.append(Finding(rule, getattr(node, "lineno", 1), f"{rule}:{detail}",
                                  f"{MESSAGES[rule]}: {detail}"))

    def name(self, node: ast.AST) -> str:
        return dotted(node, self.imports) or ""

    def run(self) -> list[Finding]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.clock(node)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.add("sanitizer.stateful", node, snippet(node))
            if isinstance(node, _FUNCTIONS):
                self.defaults(node)
                if node.name not in INITIALIZERS:
                    self.writes(node)
        return self.found

    def clock(self, node: ast.Call) -> None:
        name = self.name(node.func)
        reads_clock = name in CLOCK or (name in CLOCK_PARSERS and any(
            _clock_string(a) for a in [*node.args, *(k.value for k in node.keywords)]))
        unseeded = (name == "numpy.random.default_rng" and (not node.args or (
            isinstance(node.args[0], ast.Constant) and node.args[0].value is None))) or (
            name.startswith("numpy.random.") and name not in SEEDED and name.count(".") == 2)
        if reads_clock or unseeded:
            self.add("sanitizer.clock", node, snippet(node)[:80])

    def defaults(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for default in [*function.args.defaults, *(d for d in function.args.kw_defaults if d is not None)]:
            if _mutable_default(default):
                self.add("sanitizer.stateful", default, f"mutable default {snippet(default)[:40]} "
                         f"of {function.name}")

    def _shared(self, target: ast.AST, local: set[str]) -> bool:
        """Does writing through `target` change something that outlives the call?"""
        base = target
        while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(base, ast.Call):  # type(x).attr, x.__class__ are the class itself
                if isinstance(base.func, ast.Name) and base.func.id == "type":
                    return True
                base = base.func
                continue
            if isinstance(base, ast.Attribute) and base.attr == "__class__":
                return True
            base = base.value
        name = _base_name(base) if not isinstance(base, ast.Name) else base.id
        return name in ("self", "cls") or name in self.classes or (
            name in self.module_names and name not in local) or name in self.imports

    def writes(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = function.args
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self", "cls"}
        local |= {n.id for n in _scope_nodes(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in _scope_nodes(function):
            targets: list[ast.AST] = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)) and self._shared(target, local):
                    self.add("sanitizer.stateful", node, f"{snippet(target)[:60]} in {function.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in MUTATORS and self._shared(node.func.value, local) and \
                    not isinstance(node.func.value, ast.Call):
                self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")
            if isinstance(node, ast.Call) and self.name(node.func) in ("setattr", "delattr",
                                                                        "object.__setattr__") \
                    and node.args and self._shared(node.args[0], local):
                self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")


def state_findings(tree: ast.Module) -> list[Finding]:
    """Every clock, randomness and state finding of one S module."""
    return StateRules(tree).run()
