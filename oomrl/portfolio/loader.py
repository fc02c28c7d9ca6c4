"""Load a strategy from any directory holding a `strategies/` package, isolated from the main process.

The workspace's package is imported under a unique module name (`_oomrl_ws_<n>`), so the main
process's `strategies` package and `sys.modules['strategies']` stay untouched. Strategy modules
should import their siblings relatively (`from .base import MarketView`); absolute imports
(`from strategies.base import ...`) also resolve to the workspace's files, because while the
package executes, `strategies` is aliased to it under a lock and restored right after.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from oomrl.errors import OomrlError

if TYPE_CHECKING:  # only the protocol's shape: importing it here would load the main `strategies`
    from strategies.base import Strategy

_COUNTER = itertools.count()
_LOCK = threading.Lock()


class StrategyLoadError(OomrlError):
    """A strategy could not be loaded from a workspace."""


@dataclass(frozen=True)
class LoadedStrategy:
    """A strategy instance with the package it came from (its MarketView travels with it)."""

    strategy: Strategy  # the workspace's own class, matching the protocol by shape
    package: ModuleType
    view_class: type
    root: Path


def load_strategy(root: Path, name: str) -> LoadedStrategy:
    """Import `strategies.<name>` from `root` in isolation; the module must define `STRATEGY`."""
    package_dir = Path(root) / "strategies"
    if not (package_dir / "__init__.py").is_file():
        raise StrategyLoadError(f"{root} has no strategies/ package (strategies/__init__.py missing)")
    if not name.isidentifier() or not (package_dir / f"{name}.py").is_file():
        raise StrategyLoadError(f"no strategy module {name!r} in {package_dir}")
    alias = f"_oomrl_ws_{next(_COUNTER)}"
    with _LOCK:
        saved = {k: sys.modules.pop(k) for k in list(sys.modules) if _is_strategies(k)}
        redirect = _Redirect(alias)
        sys.meta_path.insert(0, redirect)
        try:
            package = _import_package(alias, package_dir)
            module = importlib.import_module(f"{alias}.{name}")
            base = importlib.import_module(f"{alias}.base")
        except Exception as exc:
            _forget(alias)
            raise StrategyLoadError(f"strategy {name!r} in {root} failed to import: {exc}") from exc
        finally:
            sys.meta_path.remove(redirect)
            for key in [k for k in sys.modules if _is_strategies(k)]:
                del sys.modules[key]
            sys.modules.update(saved)
    strategy = getattr(module, "STRATEGY", None)
    if strategy is None or getattr(strategy, "name", None) != name:
        raise StrategyLoadError(f"{package_dir / (name + '.py')} must define STRATEGY named {name!r}")
    return LoadedStrategy(strategy, package, base.MarketView, Path(root))


def _import_package(alias: str, package_dir: Path) -> ModuleType:
    """Import the workspace package under the module name `alias`."""
    spec = importlib.util.spec_from_file_location(alias, package_dir / "__init__.py",
                                                  submodule_search_locations=[str(package_dir)])
    if spec is None or spec.loader is None:  # pragma: no cover - a file location always has a spec
        raise StrategyLoadError(f"cannot import {package_dir}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[alias] = package
    spec.loader.exec_module(package)
    return package


def _is_strategies(name: str) -> bool:
    return name == "strategies" or name.startswith("strategies.")


def _forget(alias: str) -> None:
    for key in [k for k in sys.modules if k == alias or k.startswith(alias + ".")]:
        del sys.modules[key]


class _Redirect(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """During one load, `strategies.<x>` resolves to the very module object `<alias>.<x>`."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if _is_strategies(fullname):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.alias + spec.name[len("strategies"):])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the aliased module executed already); give it back its own spec."""
        module.__spec__ = self._specs[module.__name__]
