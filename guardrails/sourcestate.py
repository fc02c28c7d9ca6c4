"""S decides from its inputs alone: no clock, no unseeded randomness, no state kept between calls.

A decision may not depend on the day it runs or on how many calls came before it, because the
gate's runs and a scheduled rebalance differ in exactly those. So in S:
- clock: `date.today()`, `datetime.now()`/`utcnow()`/`today()`, `pd.Timestamp.now()`/`today()`,
  `pd.Period.now()` are refused where they are named (called or not), and the strings "now", "today"
  ... (also built with `+` or an f-string from literals) anywhere but a docstring: numpy and pandas
  read the clock for them in constructors, arrays, `astype` and Series alike;
- randomness: `np.random.<function>` (the global generator), generators and bit generators built
  without a seed (`default_rng()`, `RandomState()`, `PCG64()` ...) and `.sample()` without a
  `random_state`;
- state: `global`/`nonlocal`; outside `__init__`/`__post_init__`/`__new__`, no write to an
  attribute or item of `self`, `cls`, a class, a module-level name or function (nor a mutating call
  on one, also through a local alias or a module-level bound method, nor `next()` on a module-level
  iterator, nor `setattr` on them); no mutable default argument, also inside a tuple (it lives
  across calls).
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
# Clock functions beyond the tests' list; referring to one (not only calling it) is reading the clock.
CLOCK_FUNCTIONS = CLOCK | {"pandas.Period.now"}
# Generators and bit generators that draw OS entropy when given no seed (or None).
ENTROPY = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.SeedSequence",
                     "numpy.random.PCG64", "numpy.random.PCG64DXSM", "numpy.random.MT19937",
                     "numpy.random.Philox", "numpy.random.SFC64"})
INITIALIZERS = frozenset({"__init__", "__post_init__", "__new__"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _text(node: ast.AST) -> str | None:
    """The value of a string literal, or of `+` and f-strings made of literals only."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_text(v.value if isinstance(v, ast.FormattedValue) and v.conversion == -1
                       and v.format_spec is None else v) for v in node.values]
        return None if None in parts else "".join(p for p in parts if p is not None)
    return None


def _clock_string(node: ast.AST) -> bool:
    text = _text(node)
    return text is not None and text.strip().lower() in CLOCK_WORDS


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, *_FUNCTIONS)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _unseeded(node: ast.Call) -> bool:
    """A generator built without a seed (none given, or None)."""
    seeds = [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("seed", "entropy"))]
    return not seeds or all(isinstance(s, ast.Constant) and s.value is None for s in seeds)


def _mutable_default(node: ast.AST) -> bool:
    """A default that is (or holds, e.g. inside a tuple) a mutable container."""
    return any(isinstance(n, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or (
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        and n.func.id in ("list", "dict", "set", "bytearray")) for n in ast.walk(node)
        if not isinstance(n, ast.Lambda))


class StateRules:
    """The clock, randomness and state rules over one parsed S module."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports = import_map(ast.walk(tree))
        self.found: list[Finding] = []
        # module-level names, functions among them (an attribute set on a function outlives the call)
        self.module_names = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                             for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                             if isinstance(t, ast.Name)} | _module_mutables(tree) | {
            n.name for n in tree.body if isinstance(n, _FUNCTIONS)}
        # module-level names bound to a mutating method (`_PUT = _MEMO.setdefault`)
        self.mutators = {t.id for n in tree.body if isinstance(n, ast.Assign)
                         and isinstance(n.value, ast.Attribute) and n.value.attr in MUTATORS
                         for t in n.targets if isinstance(t, ast.Name)}
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.found.append(Finding(rule, getattr(node, "lineno", 1), f"{rule}:{detail}",
                                  f"{MESSAGES[rule]}: {detail}"))

    def name(self, node: ast.AST) -> str:
        return dotted(node, self.imports) or ""

    def run(self) -> list[Finding]:
        docstrings = _docstrings(self.tree)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.clock(node)
            elif isinstance(node, (ast.Attribute, ast.Name)) and self.name(node) in CLOCK_FUNCTIONS:
                self.add("sanitizer.clock", node, snippet(node)[:80])
            elif isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr)) and id(node) not in docstrings \
                    and _clock_string(node):  # "now" and "today" are the clock to numpy and pandas
                self.add("sanitizer.clock", node, f"the string {_text(node)!r}")
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.add("sanitizer.stateful", node, snippet(node))
            if isinstance(node, _FUNCTIONS):
                self.defaults(node)
                if node.name not in INITIALIZERS:
                    self.writes(node)
        return self.found

    def clock(self, node: ast.Call) -> None:
        name = self.name(node.func)
        reads_clock = name in CLOCK_PARSERS and any(
            _clock_string(a) for a in [*node.args, *(k.value for k in node.keywords)])
        unseeded = (name in ENTROPY and _unseeded(node)) or (
            name.startswith("numpy.random.") and name not in SEEDED | ENTROPY and name.count(".") == 2)
        # pandas' sample() without a random_state draws from numpy's global generator
        sampled = isinstance(node.func, ast.Attribute) and node.func.attr == "sample" and len(node.args) < 5 \
            and not any(k.arg == "random_state" and not (isinstance(k.value, ast.Constant) and k.value.value is None)
                        for k in node.keywords)
        if reads_clock or unseeded or sampled:
            self.add("sanitizer.clock", node, snippet(node)[:80])

    def defaults(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for default in [*function.args.defaults, *(d for d in function.args.kw_defaults if d is not None)]:
            if _mutable_default(default):
                self.add("sanitizer.stateful", default, f"mutable default {snippet(default)[:40]} "
                         f"of {function.name}")

    def _shared(self, target: ast.AST, local: set[str], aliases: frozenset[str] = frozenset()) -> bool:
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
        return name in ("self", "cls") or name in self.classes or name in aliases or (
            name in self.module_names and name not in local) or name in self.imports

    def writes(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = function.args
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self", "cls"}
        local |= {n.id for n in _scope_nodes(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        aliases = self.aliases(function, local)
        local -= aliases
        for node in _scope_nodes(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                    (node.func.id in self.mutators and node.func.id not in local) or (
                        node.func.id == "next" and node.args and self._shared(node.args[0], local, aliases))):
                self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")
            targets: list[ast.AST] = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)) and self._shared(target, local, aliases):
                    self.add("sanitizer.stateful", node, f"{snippet(target)[:60]} in {function.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in MUTATORS and self._shared(node.func.value, local, aliases) and \
                    not isinstance(node.func.value, ast.Call):
                self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")
            if isinstance(node, ast.Call) and self.name(node.func) in ("setattr", "delattr",
                                                                        "object.__setattr__") \
                    and node.args and self._shared(node.args[0], local, aliases):
                self.add("sanitizer.stateful", node, f"{snippet(node)[:60]} in {function.name}")


    def aliases(self, function: ast.AST, local: set[str]) -> frozenset[str]:
        """Local names bound to shared state (`log = _LOG`): writing through them writes it."""
        found: set[str] = set()
        for node in _scope_nodes(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)) \
                    and self._shared(node.value, local - found, frozenset(found)):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        return frozenset(found)


def state_findings(tree: ast.Module) -> list[Finding]:
    """Every clock, randomness and state finding of one S module."""
    return StateRules(tree).run()
