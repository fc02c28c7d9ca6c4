"""Where a test writes: each writing call's path, and whether it stays below tmp_path."""

from __future__ import annotations

import ast
from collections.abc import Callable

# Methods that write a file, on any object (pathlib, pandas, matplotlib); shared with the sanitizer.
WRITE_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "touch",
        "unlink",
        "rmdir",
        "mkdir",
        "symlink_to",
        "hardlink_to",
        "chmod",
        "lchmod",
        "link_to",
        "to_csv",
        "to_parquet",
        "to_pickle",
        "to_json",
        "to_excel",
        "to_hdf",
        "to_feather",
        "to_sql",
        "savefig",
    }
)
# Functions whose first argument is written (or removed) ...
FIRST_ARGUMENT = (
    "os.remove",
    "os.unlink",
    "os.mkdir",
    "os.makedirs",
    "os.rmdir",
    "os.removedirs",
    "os.chmod",
    "os.truncate",
    "shutil.rmtree",
    "shutil.chown",
    "numpy.save",
    "numpy.savetxt",
    "numpy.savez",
)
# ... and those that write their second (the destination); moves also remove the first.
SECOND_ARGUMENT = (
    "os.symlink",
    "os.link",
    "shutil.copy",
    "shutil.copy2",
    "shutil.copyfile",
    "shutil.copytree",
    "shutil.copymode",
    "shutil.copystat",
)
MOVES = ("os.rename", "os.replace", "os.renames", "shutil.move")
TMP_NAMES = frozenset({"tmp_path", "tmpdir", "tmp_path_factory", "tmpdir_factory"})
_CLIMB_ATTRIBUTES = frozenset({"parent", "parents", "home", "cwd"})


def mentions(node: ast.AST, names: set[str] | frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def inside_tmp(path: ast.AST, tainted: set[str] | frozenset[str]) -> bool:
    """True for a path built from tmp_path names.

    It must not climb out with '..', '/x' or .parent.
    """
    for node in ast.walk(path):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (".." in node.value or node.value.startswith(("/", "~")))
        ):
            return False
        if isinstance(node, ast.Attribute) and node.attr in _CLIMB_ATTRIBUTES:
            return False
    return mentions(path, tainted)


def _argument(call: ast.Call, index: int) -> ast.AST:
    return call.args[index] if len(call.args) > index else call


def write_targets(call: ast.Call, name: str) -> list[ast.AST]:
    """The paths a call writes, moves or removes.

    The call itself stands in when the path is not visible.
    """
    method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    # `x` of `x.method()`
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else call
    if name in ("open", "io.open") or method == "open":
        position = 1 if name in ("open", "io.open") else 0
        mode = (
            call.args[position]
            if len(call.args) > position
            else next((k.value for k in call.keywords if k.arg == "mode"), ast.Constant("r"))
        )
        if isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+"):
            return []
        return [receiver if method == "open" else _argument(call, 0)]
    if method in WRITE_METHODS and (call.args or call.keywords or not method.startswith("to_")):
        return [receiver]  # df.to_json() alone returns text
    if name in FIRST_ARGUMENT:
        return [_argument(call, 0)]
    if name in SECOND_ARGUMENT:
        return [_argument(call, 1)]
    if name in MOVES:
        return [_argument(call, 0), _argument(call, 1)]
    return []


def tainted_names(scope: ast.AST, seed: set[str]) -> set[str]:
    """`seed` plus every name assigned (in any order) from a path below those names."""
    tainted = set(seed)
    assigns = [n for n in ast.walk(scope) if isinstance(n, ast.Assign)]
    grown = True
    while grown:
        grown = False
        for node in assigns:
            names = {t.id for t in node.targets if isinstance(t, ast.Name)} - tainted
            if names and inside_tmp(node.value, tainted):
                tainted |= names
                grown = True
    return tainted


def tmp_fixtures(tree: ast.Module, is_fixture: Callable[[ast.AST], bool]) -> frozenset[str]:
    """Fixtures of this file that return or yield a path below tmp_path.

    Their users may write there.
    """
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(map(is_fixture, node.decorator_list)):
            params = {a.arg for a in node.args.args} & (TMP_NAMES | found)
            tainted = tainted_names(node, params)
            values = [
                n.value
                for n in ast.walk(node)
                if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None
            ]
            if values and all(inside_tmp(value, tainted) for value in values):
                found.add(node.name)
    return frozenset(found)
