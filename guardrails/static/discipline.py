"""Test discipline for test-gen patches: no pytest hooks, no reading of S, no varying behaviour.

No hook passes however it is spelled. No behaviour may depend on where or how often a test runs.

- hooks: a name starting with `pytest_` is refused wherever it is bound. That is def, class,
  assignment, import-as, argument, loop target. So is such an attribute or string literal. So no
  file under T can register a hook.
- reads: a file may be read only through a path built from the test file's own folder. Or it may
  be read from tmp_path. Such a path is `Path(__file__).parent / "data" / "x.json"`: literal
  segments, no `..`, one `.parent` at most. `__file__` serves only as that root.
- state: no `global`/`nonlocal`, no mutation of module-level objects from a function.
- determinism: no wall clock and no unseeded or global random state.
"""

from __future__ import annotations

import ast
from typing import TypeGuard

from guardrails.static.astscan import Finding, dotted, import_map, snippet
from guardrails.static.testio import TMP_NAMES

MESSAGES = {
    "tests.pytest_hook": "tests may not define pytest hooks or plugins",
    "tests.reads_source": "tests may read only data below their own folder or tmp_path",
    "tests.stateful": "tests may not keep state between runs or tests",
    "tests.nondeterministic": "tests may not depend on the clock or on unseeded randomness",
}
READ_FUNCTIONS = frozenset(
    {"open", "io.open", "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile"}
)
READ_METHODS = frozenset({"read_text", "read_bytes", "open", "iterdir", "glob", "rglob"})
ITERATORS = frozenset({"iterdir", "glob", "rglob"})
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "appendleft",
        "extendleft",
        "sort",
    }
)
MUTABLE_CALLS = frozenset(
    {
        "list",
        "dict",
        "set",
        "defaultdict",
        "Counter",
        "deque",
        "OrderedDict",
        "collections.defaultdict",
        "collections.Counter",
        "collections.deque",
        "collections.OrderedDict",
    }
)
CLOCK = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "pandas.Timestamp.now",
        "pandas.Timestamp.today",
        "pandas.Timestamp.utcnow",
    }
)
SEEDED = frozenset(
    {
        "numpy.random.seed",
        "numpy.random.default_rng",
        "numpy.random.Generator",
        "numpy.random.RandomState",
        "numpy.random.PCG64",
        "numpy.random.SeedSequence",
    }
)
# The clock and randomness rules S and T share (one place; sourcestate adds S's state rules).
# Constructors that read the clock when given one of the clock words.
CLOCK_PARSERS = frozenset(
    {
        "pandas.Timestamp",
        "pandas.to_datetime",
        "pandas.Period",
        "numpy.datetime64",
        "datetime.datetime.fromisoformat",
        "pandas.DatetimeIndex",
        "pandas.date_range",
        "pandas.bdate_range",
    }
)
CLOCK_WORDS = frozenset({"now", "today", "tomorrow", "yesterday"})
# Clock functions: referring to one (not only calling it) is reading the clock.
CLOCK_FUNCTIONS = CLOCK | {"pandas.Period.now"}
# Generators and bit generators that draw OS entropy when given no seed (or None).
ENTROPY = frozenset(
    {
        "numpy.random.default_rng",
        "numpy.random.RandomState",
        "numpy.random.SeedSequence",
        "numpy.random.PCG64",
        "numpy.random.PCG64DXSM",
        "numpy.random.MT19937",
        "numpy.random.Philox",
        "numpy.random.SFC64",
    }
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# Ways into pytest's machinery from a test: the plugin manager, hook callers, the config.
MACHINERY = frozenset({"pluginmanager", "ihook", "hook", "config", "session", "_hookimpl"})
MACHINERY_MODULES = (
    "_pytest",
    "pytest",
    "pluggy",
    "coverage",
    "builtins",
    "sys",
    "os",
    "importlib",
    "guardrails",
    "hypothesis.internal",
)
PATCHERS = frozenset({"setattr", "delattr", "setitem", "delitem", "patch", "object", "dict"})


class Discipline:
    """The test-discipline rules over one parsed test module."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports = import_map(ast.walk(tree))
        self.found: list[Finding] = []

    def add(self, rule: str, node: ast.AST, detail: str) -> None:
        self.found.append(
            Finding(
                rule, getattr(node, "lineno", 1), f"{rule}:{detail}", f"{MESSAGES[rule]}: {detail}"
            )
        )

    def name(self, node: ast.AST) -> str:
        return dotted(node.func if isinstance(node, ast.Call) else node, self.imports) or ""

    # -- paths -----------------------------------------------------------------------------
    def is_file_root(self, node: ast.AST) -> TypeGuard[ast.Call]:
        """`Path(__file__)` (pathlib's Path, the bare `__file__` as its one argument)."""
        return (
            isinstance(node, ast.Call)
            and self.name(node) == "pathlib.Path"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "__file__"
            and not node.keywords
        )

    def rooted(self, node: ast.AST, tainted: set[str], parents: int = 0) -> bool:
        """A path built from the test's folder or tmp_path with literal segments only."""
        if isinstance(node, ast.Name):
            return node.id in tainted or node.id in TMP_NAMES
        if self.is_file_root(node):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.rooted(node.left, tainted, parents) and _segment(node.right)
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            inner = node.value
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and inner.func.attr == "resolve"
                and not inner.args
            ):
                inner = inner.func.value
            return parents == 0 and self.is_file_root(inner) and self.rooted(inner, tainted, 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            if method in ("resolve", "absolute") and not node.args:
                return self.rooted(receiver, tainted, parents)
            if method in ("with_name", "with_suffix", "joinpath", "with_stem"):
                return all(map(_segment, node.args)) and self.rooted(receiver, tainted, parents)
        return False

    def tainted(self, scope: ast.AST, seed: set[str]) -> set[str]:
        """Names every assignment of which (in this scope) is a rooted path."""
        bindings: dict[str, list[ast.AST]] = {}
        for node in _scope_nodes(scope):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        bindings.setdefault(target.id, []).append(node.value)
            elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(
                node.target, ast.Name
            ):
                bindings.setdefault(node.target.id, []).append(node.iter)
        tainted = set(seed)
        grown = True
        while grown:
            grown = False
            for name, values in bindings.items():
                if name not in tainted and all(
                    self.rooted(v, tainted) or self.listing(v, tainted) for v in values
                ):
                    tainted.add(name)
                    grown = True
        return tainted

    def listing(self, node: ast.AST, tainted: set[str]) -> bool:
        """`root.glob("*.json")` and friends over a rooted folder (their items are rooted too)."""
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ITERATORS
            and self.rooted(node.func.value, tainted)
        )

    def reads(self, scope: ast.AST, seed: set[str]) -> None:
        tainted = self.tainted(scope, seed)
        for node in _scope_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            name = self.name(node)
            if name in READ_FUNCTIONS or name.startswith("pandas.read_"):
                first = node.args[0] if node.args else None
                if first is None or not (self.rooted(first, tainted) or _in_memory(first, self)):
                    self.add("tests.reads_source", node, snippet(node)[:80])
            elif (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in READ_METHODS
                and name not in ("io.StringIO.open",)
                and not self.rooted(node.func.value, tainted)
            ):
                self.add("tests.reads_source", node, snippet(node)[:80])

    # -- the rules ---------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        fixtures = self.path_fixtures()
        module_paths = self.tainted(self.tree, set())
        self.reads(self.tree, module_paths)
        module_state = _module_mutables(self.tree)
        docstrings = docstring_ids(self.tree)
        for node in ast.walk(self.tree):
            if isinstance(node, _SCOPES) and not isinstance(node, ast.Lambda):
                params = {a.arg for a in node.args.args + node.args.kwonlyargs}
                assigned = {
                    n.id
                    for n in _scope_nodes(node)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                }
                self.reads(
                    node, (params & (TMP_NAMES | fixtures)) | (module_paths - params - assigned)
                )
                self.state(node, module_state)
            self.hooks(node)
            self.clock(node, docstrings)
        roots = {id(node.args[0]) for node in ast.walk(self.tree) if self.is_file_root(node)}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id == "__file__" and id(node) not in roots:
                self.add("tests.reads_source", node, "__file__ outside Path(__file__)")
        return self.found

    def path_fixtures(self) -> set[str]:
        """Functions of this module (fixtures) that return a rooted path."""
        found: set[str] = set()
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                values = [
                    n.value
                    for n in _scope_nodes(node)
                    if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None
                ]
                tainted = self.tainted(node, set(TMP_NAMES))
                if values and all(self.rooted(v, tainted) for v in values):
                    found.add(node.name)
        return found

    def hooks(self, node: ast.AST) -> None:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names.append(node.asname or node.name.split(".")[-1])
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.append(node.value)
        for name in names:
            if name.startswith("pytest_"):
                self.add("tests.pytest_hook", node, name)
        if isinstance(node, ast.Attribute) and node.attr in MACHINERY and self.pytest_object(node):
            self.add("tests.pytest_hook", node, snippet(node))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PATCHERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith(MACHINERY_MODULES)
        ):
            self.add("tests.pytest_hook", node, f"patches {node.args[0].value!s}")

    def pytest_object(self, node: ast.Attribute) -> bool:
        """`request.node.config`, `item.session.config`, `pytestconfig.x`: pytest's own objects."""
        base: ast.AST = node.value
        while isinstance(base, (ast.Attribute, ast.Call, ast.Subscript)):
            base = base.func if isinstance(base, ast.Call) else base.value
        return isinstance(base, ast.Name) and base.id in (
            "request",
            "pytestconfig",
            "item",
            "session",
            "config",
            "pytest",
        )

    def state(self, function: ast.AST, module_state: set[str]) -> None:
        local = {a.arg for a in function.args.args + function.args.kwonlyargs}  # type: ignore[attr-defined]
        local |= {
            n.id
            for n in _scope_nodes(function)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        shared = module_state - local
        for node in _scope_nodes(function):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                self.add("tests.stateful", node, snippet(node))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
                and _base_name(node.func.value) in shared
            ):
                self.add("tests.stateful", node, snippet(node)[:80])
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = (
                    node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                )
                for target in targets:
                    if (
                        isinstance(target, (ast.Subscript, ast.Attribute))
                        and _base_name(target) in shared
                    ):
                        self.add("tests.stateful", node, snippet(target))

    def clock(self, node: ast.AST, docstrings: set[int]) -> None:
        """The same clock and randomness rules as S's (`clock_problem`), every spelling."""
        if isinstance(node, ast.Call):
            if unseeded_call(node, self.name(node)):
                self.add("tests.nondeterministic", node, snippet(node)[:80])
        elif isinstance(node, (ast.Attribute, ast.Name)) and self.name(node) in CLOCK_FUNCTIONS:
            self.add("tests.nondeterministic", node, snippet(node)[:80])
        elif isinstance(node, _TEXTS) and id(node) not in docstrings and clock_string(node):
            self.add("tests.nondeterministic", node, f"the string {text_value(node)!r}")


_TEXTS = (ast.Constant, ast.BinOp, ast.JoinedStr)


def text_value(node: ast.AST) -> str | None:
    """The value of a string literal, or of `+` and f-strings made of literals only."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = text_value(node.left), text_value(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [
            text_value(
                v.value
                if isinstance(v, ast.FormattedValue)
                and v.conversion == -1
                and v.format_spec is None
                else v
            )
            for v in node.values
        ]
        return None if None in parts else "".join(p for p in parts if p is not None)
    return None


def clock_string(node: ast.AST) -> bool:
    """ "now", "today" ...: numpy and pandas read the clock for them wherever they are parsed."""
    text = text_value(node)
    return text is not None and text.strip().lower() in CLOCK_WORDS


def docstring_ids(tree: ast.Module) -> set[int]:
    """The module's, classes' and functions' docstrings (by id): the clock words may be prose
    there."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _unseeded(node: ast.Call) -> bool:
    """A generator built without a seed (none given, or None)."""
    seeds = [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("seed", "entropy"))]
    return not seeds or all(isinstance(s, ast.Constant) and s.value is None for s in seeds)


def unseeded_call(node: ast.Call, name: str) -> bool:
    """A call that reads the clock or draws unseeded randomness.

    Clock functions are refused where they are named, call or not. These calls are refused:
    - a parser given a clock word.
    - a generator without a seed (`default_rng()`, `default_rng(None)`).
    - a function of numpy's global generator.
    - pandas' `.sample()` without a `random_state`.
    """
    if name in CLOCK_PARSERS and any(
        clock_string(a) for a in [*node.args, *(k.value for k in node.keywords)]
    ):
        return True
    if (name in ENTROPY and _unseeded(node)) or (
        name.startswith("numpy.random.") and name not in SEEDED | ENTROPY and name.count(".") == 2
    ):
        return True
    # pandas' sample() without a random_state draws from numpy's global generator
    return (
        isinstance(node.func, ast.Attribute)
        and node.func.attr == "sample"
        and len(node.args) < 5
        and not any(
            k.arg == "random_state"
            and not (isinstance(k.value, ast.Constant) and k.value.value is None)
            for k in node.keywords
        )
    )


def _segment(node: ast.AST) -> bool:
    """A literal path segment that stays below where it is joined."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(node.value)
        and ".." not in node.value.split("/")
        and not node.value.startswith(("/", "~"))
        and "\\" not in node.value
    )


def _in_memory(node: ast.AST, rules: Discipline) -> bool:
    return isinstance(node, ast.Call) and rules.name(node) in ("io.StringIO", "io.BytesIO")


def _base_name(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _scope_nodes(scope: ast.AST) -> list[ast.AST]:
    """Nodes of a scope's body without descending into nested functions."""
    nodes: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        nodes.append(node)
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return nodes


def _module_mutables(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            mutable = isinstance(
                value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
            ) or (isinstance(value, ast.Call) and snippet(value.func) in MUTABLE_CALLS)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)} if mutable else set()
    return found


def discipline_findings(tree: ast.Module) -> list[Finding]:
    """Every test-discipline finding of one test module."""
    return Discipline(tree).run()
