"""The diff gate: parse an agent's patch strictly, check every path's scope, apply it.

Each path is checked against the phase's scope.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import PurePosixPath

from guardrails.errors import PatchError
from guardrails.patch.apply import ApplyResult, added_lines, apply_patch
from guardrails.patch.parse import DEV_NULL, GITLINK_MODE, FileChange, parse_patch
from guardrails.verdict import Violation

__all__ = [
    "ApplyResult",
    "FileChange",
    "PatchError",
    "PatchLimits",
    "added_lines",
    "apply_patch",
    "check_patch",
    "in_scope",
    "parse_patch",
]

# Files that configure Python start-up, pytest or coverage: never writable, wherever they are.
FORBIDDEN_NAMES = frozenset(
    {
        "sitecustomize.py",
        "usercustomize.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        ".coveragerc",
        "pyproject.toml",
        "setup.py",
        "noxfile.py",
        ".pytest.ini",
        "conftest.pyc",
        ".coverage",
        "pytest.toml",
        ".pytest.toml",
        "pyvenv.cfg",
    }
)
FORBIDDEN_SUFFIXES = (".pth", ".pyc", ".pyo", ".so", ".pyd")
FORBIDDEN_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache", ".hypothesis", ".venv"})
_TEST_FILE = re.compile(r"^(test_.*|.*_test)\.py$")
# Files a test-gen patch may add to T besides Python.
# They are data read by the tests, never run as code.
DATA_SUFFIXES = (".json", ".csv", ".tsv", ".txt", ".yaml", ".yml", ".md")
# Top-level modules a new file in T must not shadow.
# pytest puts test folders first on sys.path.
SHADOWED = frozenset(sys.stdlib_module_names) | {
    "pytest",
    "_pytest",
    "pluggy",
    "coverage",
    "hypothesis",
    "numpy",
    "pandas",
    "pydantic",
    "iniconfig",
    "packaging",
    "strategies",
    "guardrails",
}
_UNCLEAN = re.compile(r"[\\\x00-\x1f\x7f]|^~")


@dataclass(frozen=True)
class PatchLimits:
    """Size limits of one patch: total bytes, file entries, hunks."""

    max_bytes: int = 256_000
    max_files: int = 40
    max_hunks: int = 400


def in_scope(path: str, roots: list[str]) -> bool:
    """True when clean `path` is one of `roots` or lies below one ("." means everything)."""
    if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
        return False
    for root in roots:
        clean = root.strip("/")
        if clean in ("", ".") or path == clean or path.startswith(clean + "/"):
            return True
    return False


def _violation(rule: str, path: str | None, message: str, line: int | None = None) -> Violation:
    return Violation(rule=rule, path=path, line=line, message=message)


def _path_violations(raw: str, prefix: str, where: int) -> list[Violation]:
    """Rules on one raw name from the patch (before scope checks)."""
    if raw == DEV_NULL:
        return []
    found: list[Violation] = []
    name = raw.removeprefix(prefix)
    if not raw.startswith(prefix):
        found.append(
            _violation(
                "diff.path_prefix",
                name,
                f"name {raw!r} lacks the {prefix!r} prefix of a git-style diff",
                where,
            )
        )
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        found.append(_violation("diff.absolute_path", name, f"absolute path {raw!r}", where))
    parts = name.split("/")
    if ".." in parts:
        found.append(_violation("diff.path_traversal", name, f"'..' in path {raw!r}", where))
    if "." in parts:
        found.append(_violation("diff.dot_path", name, f"'.' component in path {raw!r}", where))
    if "" in parts[1:] or _UNCLEAN.search(name) or name.strip() != name:
        found.append(
            _violation(
                "diff.unclean_path",
                name,
                f"path {raw!r} has empty components, "
                "backslashes, control characters or surrounding blanks",
                where,
            )
        )
    if name.endswith(DEV_NULL) or "dev/null" in name:
        found.append(_violation("diff.devnull_abuse", name, f"{raw!r} imitates /dev/null", where))
    return found


def _forbidden(path: str, creates: bool) -> str | None:
    pure = PurePosixPath(path)
    if pure.name in FORBIDDEN_NAMES or pure.name.endswith(FORBIDDEN_SUFFIXES):
        return f"{pure.name} configures Python, pytest or coverage and is never writable"
    if any(part in FORBIDDEN_DIRS for part in pure.parts):
        return f"{path} lies in a cache or VCS folder"
    if creates and pure.name == "conftest.py":
        return "new conftest.py files are not allowed"
    return None


def _shape_violations(change: FileChange) -> list[Violation]:
    """Binary, symlink, mode and /dev/null rules on one entry."""
    path, where = change.path, change.first_line
    found: list[Violation] = []
    if change.is_binary:
        found.append(_violation("diff.binary", path, "binary patches are not accepted", where))
    if change.is_symlink:
        found.append(_violation("diff.symlink", path, "symbolic links are not accepted", where))
    elif GITLINK_MODE in change.modes:
        found.append(_violation("diff.gitlink", path, "submodule entries are not accepted", where))
    elif change.mode_change is not None:
        old, new = change.mode_change
        found.append(
            _violation(
                "diff.mode_change",
                path,
                f"file mode change {old or '(new)'} -> {new} is not accepted",
                where,
            )
        )
    if change.is_added and change.is_removed:
        found.append(_violation("diff.devnull_abuse", path, "both sides are /dev/null", where))
    elif change.is_added and any(h.source_length or h.source_start for h in change.hunks):
        found.append(
            _violation(
                "diff.devnull_abuse",
                path,
                "a new file (from /dev/null) cannot remove or keep lines",
                where,
            )
        )
    elif change.is_removed and any(h.target_length or h.target_start for h in change.hunks):
        found.append(
            _violation(
                "diff.devnull_abuse",
                path,
                "a deletion (to /dev/null) cannot add or keep lines",
                where,
            )
        )
    plain_modify = not (change.is_added or change.is_removed or change.is_rename or change.is_copy)
    if plain_modify and change.source_path != change.target_path:
        found.append(
            _violation(
                "diff.name_mismatch",
                path,
                f"old name {change.source_path!r} and new name "
                f"{change.target_path!r} differ without a rename header",
                where,
            )
        )
    return found


def _scope_violations(
    change: FileChange, writable: list[str], locked: list[str], phase: str
) -> list[Violation]:
    where = change.first_line
    found: list[Violation] = []
    if change.is_rename or change.is_copy:
        if not all(in_scope(p, writable) and not in_scope(p, locked) for p in change.paths):
            kind = "rename" if change.is_rename else "copy"
            found.append(
                _violation(
                    "diff.rename_crosses_scope",
                    change.path,
                    f"{kind} {change.source_path} -> {change.target_path} "
                    "crosses the writable scope",
                    where,
                )
            )
    else:
        for path in change.paths:
            if in_scope(path, locked):
                found.append(
                    _violation(
                        "diff.locked_path", path, f"{path} is read-only in phase {phase}", where
                    )
                )
            elif not in_scope(path, writable):
                found.append(
                    _violation(
                        "diff.outside_scope",
                        path,
                        f"{path} is outside the writable paths {writable} of phase {phase}",
                        where,
                    )
                )
    creates = change.is_added or change.is_rename or change.is_copy
    for path in change.paths:
        reason = _forbidden(path, creates and path == change.target_path)
        if reason:
            found.append(_violation("diff.forbidden_file", path, reason, where))
    source = change.source_path or ""
    target_is_test = bool(
        change.target_path and _TEST_FILE.match(PurePosixPath(change.target_path).name)
    )
    if _TEST_FILE.match(PurePosixPath(source).name) and (
        change.is_removed or (change.is_rename and not target_is_test)
    ):
        found.append(
            _violation("diff.deletes_test", source, f"the patch removes test file {source}", where)
        )
    target = change.target_path
    if (
        phase == "code-patch"
        and target
        and in_scope(target, writable)
        and not target.endswith(".py")
    ):
        found.append(
            _violation(
                "diff.non_python_source",
                target,
                f"{target} is not a Python file; only .py files may be added "
                "to or changed in the source tree",
                where,
            )
        )
    if phase == "test-gen" and target and in_scope(target, writable):
        name = PurePosixPath(target).name
        if not name.endswith((".py", *DATA_SUFFIXES)):
            found.append(
                _violation(
                    "diff.non_data_fixture",
                    target,
                    (
                        f"{target}: tests may add Python files and data fixtures "
                        f"({', '.join(DATA_SUFFIXES)}), nothing else"
                    ),
                    where,
                )
            )
        elif name.endswith(".py") and name[:-3] in SHADOWED and creates:
            found.append(
                _violation(
                    "diff.shadows_module",
                    target,
                    (
                        f"{target} would shadow the module {name[:-3]!r} for everything imported "
                        "after the tests' folder is put on the import path"
                    ),
                    where,
                )
            )
    return found


def check_patch(
    changes: list[FileChange],
    writable: list[str],
    locked: list[str],
    phase: str,
    limits: PatchLimits | None = None,
) -> list[Violation]:
    """Every rule of the diff gate on parsed entries.

    An empty list means the patch may be applied.
    """
    limits = limits or PatchLimits()
    found: list[Violation] = []
    size = sum(c.size for c in changes)
    hunks = sum(len(c.hunks) for c in changes)
    for label, value, limit in (
        ("bytes", size, limits.max_bytes),
        ("file entries", len(changes), limits.max_files),
        ("hunks", hunks, limits.max_hunks),
    ):
        if value > limit:
            found.append(
                _violation(
                    "diff.too_large", None, f"the patch has {value} {label}; the limit is {limit}"
                )
            )
    for change in changes:
        found += _path_violations(change.raw_source, "a/", change.first_line)
        found += _path_violations(change.raw_target, "b/", change.first_line)
        found += _shape_violations(change)
        found += _scope_violations(change, writable, locked, phase)
    unique: dict[tuple[str, str | None, int | None], Violation] = {}
    for violation in found:
        unique.setdefault((violation.rule, violation.path, violation.line), violation)
    return list(unique.values())
