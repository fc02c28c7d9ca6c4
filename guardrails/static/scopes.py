"""Scope-aware AST walking for the sanitizer: source order, parents first, Python's scopes.

The walk visits every node once. It is iterative, so deep code does not exhaust the stack. It
keeps, per scope, the names bound in it. A bare name that no enclosing function binds is a global
or a builtin at run time. Python falls back to the builtins when a module-level or class-level
binding never ran. So only function-local bindings count as hiding a builtin.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from typing import Any

_SCOPE_TYPES = frozenset(
    {
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.Lambda,
        ast.ListComp,
        ast.SetComp,
        ast.DictComp,
        ast.GeneratorExp,
    }
)
# Fields that may hold child nodes, per node type.
# Contexts and leaves have none to visit.
_FIELDS: dict[type, tuple[str, ...]] = {ast.Name: (), ast.Constant: (), ast.alias: ()}
# Operator nodes: no fields, no rules; never worth a visit.
_INERT = frozenset(
    kind
    for base in (ast.operator, ast.boolop, ast.cmpop, ast.unaryop)
    for kind in base.__subclasses__()
)


def _fields(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of a node type that may hold child nodes, last first (contexts skipped)."""
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(reversed([f for f in kind._fields if f != "ctx"]))
    return fields


@functools.cache
def _handlers(kind: type) -> dict[type, Callable[[Any, Any, int], None]]:
    """visit_<NodeType> methods of a scanner class, keyed by node type."""
    return {
        getattr(ast, name[6:]): getattr(kind, name)
        for name in dir(kind)
        if name.startswith("visit_") and hasattr(ast, name[6:])
    }


class ScopedWalker:
    """Calls visit_<NodeType>(node, scope) on every node; subclasses add the rules."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        # scopes: (kind, parent index, bound names, declared global)
        self.scopes: list[tuple[str, int, set[str], set[str]]] = [("module", -1, set(), set())]
        self.builtins: list[tuple[str, int, ast.AST]] = []
        # Every visited node with its scope, in visiting order, and the node that opened each scope.
        # S's clock and state rules index the module from these instead of walking it again.
        self.visited: list[tuple[ast.AST, int]] = []
        self.openers: dict[int, ast.AST] = {}

    def walk(self) -> None:
        """Visit every node in source order, each with the index of its scope."""
        stack: list[tuple[ast.AST, int]] = [(self.tree, 0)]
        pop, push, keep = stack.pop, stack.append, self.visited.append
        handlers = _handlers(type(self))  # type: ignore[arg-type]  # a class is hashable; mypy checks its instances
        node_type, inert, known, scopes = ast.AST, _INERT, _FIELDS, _SCOPE_TYPES  # locals: faster
        while stack:
            item = pop()
            keep(item)
            node, scope = item
            kind = type(node)
            handler = handlers.get(kind)
            if handler is not None:
                handler(self, node, scope)
            # children pushed last first: nodes are visited in source order, parents first
            if kind in scopes:
                stack += reversed(self._scope_children(node, scope))
            elif kind is ast.ClassDef:
                body = self._new_scope("class", scope)
                self.openers[body] = node
                stack += [(child, body) for child in reversed(node.body)]  # type: ignore[attr-defined]
                opener: Any = node  # a ClassDef: mypy cannot narrow on `kind is ast.ClassDef`
                stack += [
                    (child, scope)
                    for child in reversed([*opener.decorator_list, *opener.bases, *opener.keywords])
                ]
            else:  # inlined child iteration: this loop is most of the sanitizer's time
                fields = known.get(kind)
                for name in fields if fields is not None else _fields(kind):
                    value = getattr(node, name, None)
                    if type(value) is list:
                        for item in reversed(value):
                            if isinstance(item, node_type) and type(item) not in inert:
                                push((item, scope))
                    elif isinstance(value, node_type) and type(value) not in inert:
                        push((value, scope))

    def _new_scope(self, kind: str, parent: int) -> int:
        self.scopes.append((kind, parent, set(), set()))
        return len(self.scopes) - 1

    def _scope_children(self, node: ast.AST, scope: int) -> list[tuple[ast.AST, int]]:
        own = self._new_scope("function", scope)
        self.openers[own] = node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            outer: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d)]
            if not isinstance(node, ast.Lambda):
                outer += [*node.decorator_list, *([node.returns] if node.returns else [])]
            params = [
                *args.posonlyargs,
                *args.args,
                *args.kwonlyargs,
                *([args.vararg] if args.vararg else []),
                *([args.kwarg] if args.kwarg else []),
            ]
            for param in params:
                self.scopes[own][2].add(param.arg)
                if param.annotation is not None:
                    outer.append(param.annotation)
            body = node.body if isinstance(node.body, list) else [node.body]
            return [(child, scope) for child in outer] + [(child, own) for child in body]
        generators = node.generators  # type: ignore[attr-defined]
        first = [(generators[0].iter, scope)]
        rest: list[ast.AST] = [generators[0].target, *generators[0].ifs, *generators[1:]]
        rest += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]  # type: ignore[attr-defined]
        return first + [(child, own) for child in rest]

    def _bind(self, name: str, scope: int) -> None:
        self.scopes[scope][2].add(name)

    def unbound_builtins(self) -> list[tuple[str, ast.AST]]:
        """Recorded builtin names that no enclosing function scope binds."""
        found = []
        for name, scope, node in self.builtins:
            while scope > 0:
                kind, parent, bound, declared = self.scopes[scope]
                if kind == "function" and name in bound and name not in declared:
                    break
                scope = parent
            else:
                found.append((name, node))
        return found

    def visit_Global(self, node: ast.Global, scope: int) -> None:
        self.scopes[scope][3].update(node.names)

    visit_Nonlocal = visit_Global

    def visit_arg(self, node: ast.arg, scope: int) -> None:
        self._bind(node.arg, scope)

    def visit_ExceptHandler(self, node: ast.ExceptHandler, scope: int) -> None:
        if node.name:
            self._bind(node.name, scope)
