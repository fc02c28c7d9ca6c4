"""Existing tests may be added to, never weakened.

Each old test must keep every statement it had, in order. So must each old helper that asserts. New
statements may only be added around them. Statements are compared as ASTs (positions and comments
ignored). Take a compound statement (`with`, `for`, `if`, `try`). It is kept when its header is
unchanged and its bodies keep theirs. So a check may be added inside a block. Parametrize
decorators may gain cases, never lose one. Other decorators and the parameters stay as they were.
Anything else is `tests.weakened`: an assertion removed, a tolerance loosened, `in` instead of
`==`. So is a changed expected value, or a changed call before the assertion.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from guardrails.static.astscan import Finding, snippet

BODIES = ("body", "orelse", "finalbody", "handlers")
# How a superseded test is named (the repair's mandate and `--supersedes` alike).
# It is its pytest node id without parametrized cases.
# Examples: 'tests/t.py::test_x' or 'tests/t.py::TestY::test_z'.
NODE_ID = r"([^\s:]+\.py)::((?:[A-Za-z_]\w*::)?test\w*)"


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _header(node: ast.AST) -> str:
    """The statement with its bodies emptied: `with x as y:` of a `with` block."""
    fields = {name: value for name, value in ast.iter_fields(node) if name not in BODIES}
    return type(node).__name__ + repr(
        {
            k: _dump(v)
            if isinstance(v, ast.AST)
            else [_dump(i) if isinstance(i, ast.AST) else i for i in v]
            if isinstance(v, list)
            else v
            for k, v in fields.items()
        }
    )


def _kept(old: ast.AST, new: ast.AST) -> bool:
    """Is `old` in `new`, unchanged or with statements only added inside its bodies?"""
    if _dump(old) == _dump(new):
        return True
    if type(old) is not type(new) or not isinstance(old, (ast.stmt, ast.ExceptHandler)):
        return False
    if _header(old) != _header(new):
        return False
    return all(_subsequence(getattr(old, name, []), getattr(new, name, [])) for name in BODIES)


def _subsequence(old: Sequence[ast.AST], new: Sequence[ast.AST]) -> bool:
    """Every old statement kept, in order, in the new list."""
    position = 0
    for statement in old:
        while position < len(new) and not _kept(statement, new[position]):
            position += 1
        if position == len(new):
            return False
        position += 1
    return True


def _parametrize(function: ast.AST) -> dict[str, list[str]]:
    """argnames -> the dumped cases of each `pytest.mark.parametrize` decorator."""
    found: dict[str, list[str]] = {}
    for decorator in getattr(function, "decorator_list", []):
        if (
            isinstance(decorator, ast.Call)
            and snippet(decorator.func).endswith("mark.parametrize")
            and decorator.args
        ):
            cases = decorator.args[1] if len(decorator.args) > 1 else None
            elements = cases.elts if isinstance(cases, (ast.List, ast.Tuple)) else [cases]
            found[_dump(decorator.args[0])] = [_dump(e) for e in elements if e is not None]
    return found


def _other_decorators(function: ast.AST) -> list[str]:
    return [
        _dump(d)
        for d in getattr(function, "decorator_list", [])
        if not (isinstance(d, ast.Call) and snippet(d.func).endswith("mark.parametrize"))
    ]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The parameters without a method's `self` (a test moved into a class keeps its own)."""
    args = function.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if positional[:1] == ["self"]:
        positional = positional[1:]
    return repr(
        (
            positional,
            [a.arg for a in args.kwonlyargs],
            [_dump(d) for d in args.defaults],
            [_dump(d) if d else None for d in args.kw_defaults],
            args.vararg and args.vararg.arg,
            args.kwarg and args.kwarg.arg,
        )
    )


def _problem(
    old: ast.FunctionDef | ast.AsyncFunctionDef, new: ast.FunctionDef | ast.AsyncFunctionDef
) -> str | None:
    """Why `new` is weaker than `old`, or None when it only adds."""
    if _parameters(old) != _parameters(new):
        return "its parameters changed"
    if _other_decorators(old) != _other_decorators(new):
        return "its decorators changed"
    new_cases = _parametrize(new)
    for names, cases in _parametrize(old).items():
        if names not in new_cases:
            return "a parametrize decorator was removed"
        missing = [case for case in cases if case not in new_cases[names]]
        if missing:
            return f"{len(missing)} parametrized case(s) were removed or changed"
    if not _subsequence(old.body, new.body):
        lost = next((s for s in old.body if not any(_kept(s, n) for n in new.body)), old.body[0])
        return f"a statement was removed or changed: {snippet(lost)}"
    return None


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module functions and class methods by qualified name."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, kinds):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from (
                (f"{node.name}.{item.name}", item) for item in node.body if isinstance(item, kinds)
            )


def _asserts(function: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Assert)
        or isinstance(n, ast.Call)
        and snippet(n.func).rsplit(".", 1)[-1].startswith(("assert", "fail"))
        for n in ast.walk(function)
    )


def weakened_findings(
    old_tree: ast.Module, new_tree: ast.Module, superseded: frozenset[str] = frozenset()
) -> list[Finding]:
    """`tests.weakened` for every old test or asserting helper the new text weakens.

    A test moved into a class (or out of one) is found by its own name. A removed one is
    `tests.removed_test`. `superseded` is for red mode. It holds qualified names ('test_x',
    'TestY.test_z') of the old tests the approved mandate names as obsolete. A changed one is
    judged as a new red test instead. It must fail on today's S by an assertion about S's value. It
    must fail on every trivial candidate too. Every other old test keeps this rule. So does every
    asserting helper, since unchanged tests call them.
    """
    new_by_name: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for _, function in _functions(new_tree):
        new_by_name.setdefault(function.name, []).append(function)
    found: list[Finding] = []
    for qualified, old in _functions(old_tree):
        if not (old.name.startswith("test") or _asserts(old)) or old.name not in new_by_name:
            continue
        if old.name.startswith("test") and qualified in superseded:
            continue
        problems = [_problem(old, new) for new in new_by_name[old.name]]
        if all(problems):
            new = new_by_name[old.name][0]
            found.append(
                Finding(
                    "tests.weakened",
                    new.lineno,
                    f"{qualified}: {problems[0]}",
                    (
                        f"{qualified} was weakened ({problems[0]}); existing tests may be "
                        "added to, "
                        "never weakened: keep every statement and case, add new checks"
                    ),
                )
            )
    return found
