"""S decides from its inputs alone: no clock, no unseeded randomness, no state kept between calls.

A decision may not depend on the day it runs or on how many calls came before it. The gate's runs
and a scheduled rebalance differ in exactly those. So in S:
- clock: `date.today()`, `datetime.now()`/`utcnow()`/`today()`, `pd.Timestamp.now()`/`today()`,
  `pd.Period.now()` are refused where they are named (called or not). So are the strings "now",
  "today" ... anywhere but a docstring, also built with `+` or an f-string from literals. numpy
  and pandas read the clock for them in constructors, arrays, `astype` and Series alike.
- randomness: `np.random.<function>` (the global generator) is refused. So are generators and bit
  generators built without a seed (`default_rng()`, `RandomState()`, `PCG64()` ...). So is
  `.sample()` without a `random_state`.
- state: `global`/`nonlocal` are refused. Only `__init__`/`__post_init__`/`__new__` may write
  shared state. Elsewhere, nothing writes to an attribute or item of `self` or `cls`. Nor of a
  class, a module-level name or function. No mutating call on one either, also through a local
  alias or a module-level bound method. No `next()` on a module-level iterator, no `setattr` on
  them. No mutable default argument, also inside a tuple: it lives across calls.
Cross-validation recomputes sampled decisions in fresh hosts, for what static rules cannot see.
"""

from __future__ import annotations

import ast
from typing import Any

from guardrails.static.astscan import Finding, dotted, import_map, snippet
from guardrails.static.discipline import (
    _SCOPES,
    _TEXTS,
    CLOCK_FUNCTIONS,
    MUTATORS,
    _base_name,
    _module_mutables,
    clock_string,
    text_value,
    unseeded_call,
)
from guardrails.static.scopes import _FIELDS, _INERT, _fields

MESSAGES = {
    "sanitizer.clock": "strategy code may not read the clock or unseeded randomness",
    "sanitizer.stateful": "strategy code may not keep state between calls",
}
INITIALIZERS = frozenset({"__init__", "__post_init__", "__new__"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CLOCK_TAILS = frozenset(name.rsplit(".", 1)[-1] for name in CLOCK_FUNCTIONS)


_BUCKETS = frozenset({ast.Import, ast.ImportFrom, ast.ClassDef, ast.Module, *_FUNCTIONS})
# The node types StateRules.run has a rule for.
# The rest (most of a module) are skipped at once.
_RULED = frozenset(
    {ast.Call, ast.Attribute, ast.Name, *_TEXTS, ast.Global, ast.Nonlocal, *_FUNCTIONS}
)
_SCOPE_KINDS = frozenset(_SCOPES)


def _index(
    tree: ast.Module,
) -> tuple[list[tuple[ast.AST, int]], dict[int, list[ast.AST]], dict[type, list[ast.AST]]]:
    """Every node once as (node, 0), parents first in source order; and more.

    Also each function's own nodes, as `_scope_nodes` gives them. Those are its children, nested
    functions included but not their insides. Also the imports, classes, functions and the module
    by type.
    """
    nodes: list[tuple[ast.AST, int]] = []  # (node, 0): the walk's pairs, scopes unused here
    own: dict[int, list[ast.AST]] = {}
    buckets: dict[type, list[ast.AST]] = {kind: [] for kind in _BUCKETS}
    buckets[ast.ImportFrom] = buckets[ast.Import]  # one list: both kinds in source order
    stack: list[tuple[ast.AST, list[ast.AST] | None]] = [(tree, None)]
    pop, push, keep = stack.pop, stack.append, nodes.append
    scopes, inert, node_type, known = frozenset(_SCOPES), _INERT, ast.AST, _FIELDS  # locals: faster
    while stack:
        node, owner = pop()
        keep((node, 0))
        if owner is not None:
            owner.append(node)
        kind = type(node)
        inner = owner
        if kind in _BUCKETS:
            buckets[kind].append(node)
        if kind in scopes:
            inner = own[id(node)] = []
        fields = known.get(kind)
        for name in fields if fields is not None else _fields(kind):
            value = getattr(node, name, None)
            if type(value) is list:
                for item in reversed(value):
                    if isinstance(item, node_type) and type(item) not in inert:
                        push((item, inner))
            elif isinstance(value, node_type) and type(value) not in inert:
                push((value, inner))
    return nodes, own, buckets


def index_of_walk(
    visited: list[tuple[ast.AST, int]], scopes: list[Any], openers: dict[int, ast.AST]
) -> tuple[list[tuple[ast.AST, int]], dict[int, list[ast.AST]], dict[type, list[ast.AST]]]:
    """What `_index` gives, from the capability scan's walk (`astwalk.ScopedWalker.visited`).

    It needs no walk of its own. Each node belongs to the nearest enclosing function or lambda. A
    comprehension or class body belongs to its enclosing one. That is how Python runs it: defaults
    and decorators run outside.
    """
    owners: list[list[ast.AST] | None] = []
    own: dict[int, list[ast.AST]] = {}
    for index, (_kind, parent, _bound, _declared) in enumerate(scopes):
        opener = openers.get(index)
        if opener is not None and type(opener) in _SCOPE_KINDS:
            owners.append(own.setdefault(id(opener), []))
        else:
            owners.append(owners[parent] if index else None)
    buckets: dict[type, list[ast.AST]] = {kind: [] for kind in _BUCKETS}
    buckets[ast.ImportFrom] = buckets[ast.Import]
    kinds = _BUCKETS
    for node, scope in visited:  # the walk's own pairs are the node list: no copy of 10^4 nodes
        owner = owners[scope]
        if owner is not None:
            owner.append(node)
        kind = type(node)
        if kind in kinds:
            buckets[kind].append(node)
    return visited, own, buckets


def _docstrings(holders: list[Any]) -> set[int]:
    """The modules', classes' and functions' docstrings (by id), from the index's buckets."""
    return {
        id(node.body[0].value)
        for node in holders
        if node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _mutable_default(node: ast.AST) -> bool:
    """A default that is (or holds, e.g. inside a tuple) a mutable container."""
    return any(
        isinstance(n, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp))
        or (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("list", "dict", "set", "bytearray")
        )
        for n in ast.walk(node)
        if not isinstance(n, ast.Lambda)
    )


class StateRules:
    """The clock, randomness and state rules over one parsed S module."""

    def __init__(self, tree: ast.Module, walker: Any = None) -> None:
        self.tree = tree
        # One walk, shared by every rule below: the capability scan's when it ran, else its own.
        self.visited, self.own, self.kinds = (
            index_of_walk(walker.visited, walker.scopes, walker.openers)
            if walker is not None
            else _index(tree)
        )
        self.imports = import_map(self.kinds[ast.Import])  # and ImportFrom, in source order
        self.found: list[Finding] = []
        # module-level names, functions among them (an attribute set on a function outlives the
        # call)
        self.module_names = (
            {
                t.id
                for n in tree.body
                if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            }
            | _module_mutables(tree)
            | {n.name for n in tree.body if isinstance(n, _FUNCTIONS)}
        )
        # module-level names bound to a mutating method (`_PUT = _MEMO.setdefault`)
        self.mutators = {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Attribute)
            and n.value.attr in MUTATORS
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        classes: list[Any] = self.kinds[ast.ClassDef]
        self.classes = {n.name for n in classes}

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.found.append(
            Finding(
                rule, getattr(node, "lineno", 1), f"{rule}:{detail}", f"{MESSAGES[rule]}: {detail}"
            )
        )

    def name(self, node: ast.AST) -> str:
        return dotted(node, self.imports) or ""

    def run(self) -> list[Finding]:
        docstrings = _docstrings(
            [n for kind in (ast.Module, ast.ClassDef, *_FUNCTIONS) for n in self.kinds[kind]]
        )
        imports, tails = self.imports, _CLOCK_TAILS
        node: Any
        relevant = _RULED
        for node, _ in self.visited:  # by exact type first: this loop sees every node of S
            kind = type(node)
            if kind not in relevant:
                continue
            if kind is ast.Call:
                self.clock(node)
            elif (
                kind is ast.Attribute
                and node.attr in tails
                or kind is ast.Name
                and node.id in imports
            ) and self.name(node) in CLOCK_FUNCTIONS:
                self.add("sanitizer.clock", node, snippet(node)[:80])
            elif (
                kind in _TEXTS
                and (kind is not ast.Constant or type(node.value) is str)
                and id(node) not in docstrings
                and clock_string(node)
            ):
                # Numpy and pandas' clock
                self.add("sanitizer.clock", node, f"the string {text_value(node)!r}")
            elif kind is ast.Global or kind is ast.Nonlocal:
                self.add("sanitizer.stateful", node, snippet(node))
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                self.defaults(node)
                if node.name not in INITIALIZERS:
                    self.writes(node)
        return self.found

    def clock(self, node: ast.Call) -> None:
        if unseeded_call(node, self.name(node.func)):
            self.add("sanitizer.clock", node, snippet(node)[:80])

    def defaults(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for default in [
            *function.args.defaults,
            *(d for d in function.args.kw_defaults if d is not None),
        ]:
            if _mutable_default(default):
                self.add(
                    "sanitizer.stateful",
                    default,
                    f"mutable default {snippet(default)[:40]} of {function.name}",
                )

    def _shared(
        self, target: ast.AST, local: set[str], aliases: frozenset[str] = frozenset()
    ) -> bool:
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
        return (
            name in ("self", "cls")
            or name in self.classes
            or name in aliases
            or (name in self.module_names and name not in local)
            or name in self.imports
        )

    def writes(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = function.args
        scope = self.own[id(function)]
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self", "cls"}
        local |= {n.id for n in scope if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        aliases = self.aliases(scope, local)
        local -= aliases
        node: Any
        for node in scope:
            kind = type(node)
            if kind is ast.Call:
                self._call_writes(node, function, local, aliases)
                continue
            targets: list[ast.AST] = []
            if kind is ast.Assign or kind is ast.Delete:
                targets = list(node.targets)
            elif kind is ast.AugAssign or kind is ast.AnnAssign:
                targets = [node.target]
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)) and self._shared(
                    target, local, aliases
                ):
                    self.add(
                        "sanitizer.stateful", node, f"{snippet(target)[:60]} in {function.name}"
                    )

    def _call_writes(
        self,
        node: ast.Call,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        local: set[str],
        aliases: frozenset[str],
    ) -> None:
        """A call that mutates shared state.

        That is a module-level bound mutator or next() on a module-level iterator. Or it is a
        mutating method or setattr on something shared.
        """
        func = node.func
        if isinstance(func, ast.Name) and (
            (func.id in self.mutators and func.id not in local)
            or (func.id == "next" and node.args and self._shared(node.args[0], local, aliases))
        ):
            self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")
        if (
            isinstance(func, ast.Attribute)
            and func.attr in MUTATORS
            and self._shared(func.value, local, aliases)
            and not isinstance(func.value, ast.Call)
        ):
            self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")
        if (
            node.args
            and self.name(func) in ("setattr", "delattr", "object.__setattr__")
            and self._shared(node.args[0], local, aliases)
        ):
            self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")

    def aliases(self, scope: list[ast.AST], local: set[str]) -> frozenset[str]:
        """Local names bound to shared state (`log = _LOG`): writing through them writes it."""
        found: set[str] = set()
        for node in scope:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, (ast.Name, ast.Attribute))
                and self._shared(node.value, local - found, frozenset(found))
            ):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        return frozenset(found)


def state_findings(tree: ast.Module, walker: Any = None) -> list[Finding]:
    """Every clock, randomness and state finding of one S module.

    `walker` is the capability scan that already walked it. Its visit order is reused.
    """
    return StateRules(tree, walker).run()
