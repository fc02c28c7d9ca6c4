"""The workspace contract: `[tool.oomrl.guard]` in DIR/pyproject.toml, validated (docs/gate.md,
Contract)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from guardrails.errors import GateSetupError

PHASES = ("code-patch", "test-gen")
CONVENTIONS = ("call", "strategy")
PROPERTIES = ("weights", "known_symbols", "deterministic")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class BehaviourContract:
    """How the judge calls the candidate outside pytest: `[tool.oomrl.guard.behaviour]`."""

    convention: str
    entry: str
    view: str = "strategies.base:MarketView"
    properties: tuple[str, ...] = ()
    inputs: str = "behaviour.json"


@dataclass(frozen=True)
class GuardContract:
    """What the gate may treat as source (S) and tests (T) of one workspace, and its limits."""

    root: Path
    source: tuple[str, ...]
    tests: tuple[str, ...]
    coverage_min: float = 95.0
    allow: frozenset[str] = field(default_factory=frozenset)
    allow_imports: frozenset[str] = field(default_factory=frozenset)
    holdout: Path | None = None
    behaviour: BehaviourContract | None = None
    time_limit_s: float = 300.0
    memory_limit_mb: int = 4096
    mutation_min_kill: float = 0.5
    mutation_max: int = 8

    def writable(self, phase: str) -> list[str]:
        """Trees the patch may touch in `phase`: S in code-patch, T in test-gen."""
        return list(self.source if phase == "code-patch" else self.tests)

    def locked(self, phase: str) -> list[str]:
        """Trees that are read-only and hash-anchored in `phase`."""
        return list(self.tests if phase == "code-patch" else self.source)


def _tree_list(table: dict[str, Any], key: str, pyproject: Path) -> tuple[str, ...]:
    value = table.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise GateSetupError(
            f"{pyproject}: [tool.oomrl.guard] {key} must be a non-empty list of "
            f"relative paths, got {value!r}"
        )
    trees = []
    for raw in value:
        pure = PurePosixPath(raw.strip().rstrip("/"))
        if pure.is_absolute() or ".." in pure.parts or str(pure) in ("", "."):
            raise GateSetupError(
                f"{pyproject}: [tool.oomrl.guard] {key} entry {raw!r} must be a "
                "path inside the workspace"
            )
        trees.append(str(pure))
    return tuple(trees)


def _number(
    table: dict[str, Any], key: str, default: float, low: float, high: float, pyproject: Path
) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise GateSetupError(
            f"{pyproject}: [tool.oomrl.guard] {key} must be a number in "
            f"[{low}, {high}], got {value!r}"
        )
    return float(value)


def _holdout(table: dict[str, Any], root: Path, pyproject: Path) -> Path | None:
    raw = table.get("holdout")
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise GateSetupError(f"{pyproject}: [tool.oomrl.guard] holdout must be a path, got {raw!r}")
    return check_holdout((root / raw).resolve(), root)


def check_holdout(holdout: Path, root: Path) -> Path:
    """A held-out folder must exist and lie outside the workspace, where the agent never reads."""
    holdout = holdout.resolve()
    if not holdout.is_dir():
        raise GateSetupError(f"held-out tests folder {holdout} does not exist")
    if holdout == root.resolve() or root.resolve() in holdout.parents:
        raise GateSetupError(
            f"held-out tests folder {holdout} lies inside the workspace {root}: "
            "the agent could read it"
        )
    return holdout


def _behaviour(table: dict[str, Any], pyproject: Path) -> BehaviourContract | None:
    raw = table.get("behaviour")
    if raw is None:
        return None
    where = f"{pyproject}: [tool.oomrl.guard.behaviour]"
    if not isinstance(raw, dict):
        raise GateSetupError(f"{where} must be a table")
    unknown = set(raw) - {"convention", "entry", "view", "properties", "inputs"}
    convention, entry = raw.get("convention", "call"), raw.get("entry")
    view = raw.get("view", "strategies.base:MarketView")
    properties, inputs = raw.get("properties", []), raw.get("inputs", "behaviour.json")
    problems = [f"unknown keys {sorted(unknown)}"] if unknown else []
    if convention not in CONVENTIONS:
        problems.append(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    for key, value in (("entry", entry), ("view", view)):
        if not isinstance(value, str) or not _TARGET.match(value):
            problems.append(f"{key} must name 'module:attribute', got {value!r}")
    if not isinstance(properties, list) or not set(properties) <= set(PROPERTIES):
        problems.append(f"properties must be a list drawn from {PROPERTIES}, got {properties!r}")
    if not isinstance(inputs, str) or not inputs or "/" in inputs or inputs.startswith("."):
        problems.append(f"inputs must be a file name in the held-out folder, got {inputs!r}")
    if problems:
        raise GateSetupError(f"{where}: " + "; ".join(problems))
    return BehaviourContract(convention, str(entry), str(view), tuple(properties), str(inputs))


def _modules(table: dict[str, Any], pyproject: Path) -> frozenset[str]:
    value = table.get("allow_imports", [])
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _MODULE.match(v) for v in value
    ):
        raise GateSetupError(
            f"{pyproject}: [tool.oomrl.guard] allow_imports must be a list of "
            f"module names, got {value!r}"
        )
    return frozenset(value)


def load_contract(workspace: Path) -> GuardContract:
    """Read and validate `[tool.oomrl.guard]`; raise GateSetupError naming what is wrong."""
    root = workspace.resolve()
    if not root.is_dir():
        raise GateSetupError(f"workspace {workspace} is not a directory")
    pyproject = root / "pyproject.toml"
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateSetupError(
            f"{pyproject} is missing: the workspace contract lives there"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GateSetupError(f"{pyproject} is not valid TOML: {exc}") from None
    table = document.get("tool", {}).get("oomrl", {}).get("guard")
    if not isinstance(table, dict):
        raise GateSetupError(f"{pyproject} has no [tool.oomrl.guard] table")
    allow = table.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(rule, str) for rule in allow):
        raise GateSetupError(f"{pyproject}: [tool.oomrl.guard] allow must be a list of rule names")
    source = _tree_list(table, "source", pyproject)
    for tree in source:
        if not (root / tree).is_dir():
            raise GateSetupError(f"{pyproject}: source tree {tree!r} is not a folder in {root}")
    return GuardContract(
        root=root,
        source=source,
        tests=_tree_list(table, "tests", pyproject),
        coverage_min=_number(table, "coverage_min", 95.0, 0.0, 100.0, pyproject),
        allow=frozenset(allow),
        allow_imports=_modules(table, pyproject),
        holdout=_holdout(table, root, pyproject),
        behaviour=_behaviour(table, pyproject),
        time_limit_s=_number(table, "time_limit_s", 300.0, 1.0, 86_400.0, pyproject),
        memory_limit_mb=int(_number(table, "memory_limit_mb", 4096, 256, 1_048_576, pyproject)),
        mutation_min_kill=_number(table, "mutation_min_kill", 0.5, 0.0, 1.0, pyproject),
        mutation_max=int(_number(table, "mutation_max", 8, 0, 1000, pyproject)),
    )
