"""Front doors that load a public name's own module on first use: light callers stay light."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def homes(init_file: str) -> dict[str, str]:
    """Each name the package's `if TYPE_CHECKING:` block imports, with the module it comes from."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def front_door(package: str, init_file: str) -> Callable[[str], Any]:
    """The module `__getattr__` of a package: a public name is imported from its home on first use.

    The package's `if TYPE_CHECKING:` imports name the homes, for mypy and for this function alike.
    A door could import every module up front. Then `import guardrails.sandbox.tempdirs` would load
    pytest and coverage too, since the test runner's launcher imports them.
    """
    found: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        found.update(found or homes(init_file))
        if name not in found:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(found[name]), name)

    return __getattr__
