"""RO-Lock anchoring: scratch copies of a workspace and SHA-256 manifests of its locked trees."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from guardrails.verdict import Violation

# Files that configure Python start-up, pytest or coverage: anchored wherever they are.
CONFIG_FILE_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "setup.py",
        "pyproject.toml",
        ".coveragerc",
        "sitecustomize.py",
        "usercustomize.py",
        "noxfile.py",
        "pyvenv.cfg",
    }
)
CONFIG_SUFFIXES = (".pth",)
# Never copied into the scratch area: VCS data, caches, byte code, virtual environments.
SKIPPED_NAMES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        "node_modules",
        "htmlcov",
        ".eggs",
    }
)
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def is_config_file(name: str) -> bool:
    """True for a file name that configures Python, pytest or coverage."""
    return name in CONFIG_FILE_NAMES or name.endswith(CONFIG_SUFFIXES)


def _skipped(name: str) -> bool:
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES) or name.startswith(".coverage")


def scratch_copy(source: Path, target: Path) -> None:
    """Copy a workspace without VCS data, caches or special files (sockets, fifos, devices).

    Symlinks leaving the workspace are dropped.
    """
    root = source.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        dropped = {name for name in names if _skipped(name)}
        for name in names:
            path = Path(folder, name)
            mode = path.lstat().st_mode
            if path.is_symlink():
                if root not in path.resolve().parents:
                    dropped.add(name)
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                dropped.add(name)
        return dropped

    shutil.copytree(root, target, symlinks=True, ignore=ignore)


def _file_digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _walk(root: Path) -> Iterable[Path]:
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in dirs:
            if (base / name).is_symlink():
                yield base / name
        for name in files:
            yield base / name


def tree_manifest(root: Path) -> dict[str, str]:
    """SHA-256 of every file below `root`, keyed by its path relative to `root`."""
    return {path.relative_to(root).as_posix(): _file_digest(path) for path in _walk(root)}


def lock_manifest(root: Path, locked: list[str]) -> dict[str, str]:
    """Digests of the locked trees and of every configuration file anywhere in the workspace."""
    manifest = {}
    for rel, digest in tree_manifest(root).items():
        in_locked = any(rel == tree or rel.startswith(tree + "/") for tree in locked)
        if in_locked or is_config_file(rel.rsplit("/", 1)[-1]):
            manifest[rel] = digest
    return manifest


def manifest_digest(manifest: dict[str, str]) -> str:
    """One SHA-256 over a whole manifest (order-independent)."""
    lines = "".join(f"{path}\0{digest}\n" for path, digest in sorted(manifest.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or changed between two manifests."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def hash_violations(before: dict[str, str], after: dict[str, str], when: str) -> list[Violation]:
    """One `lock.hash_mismatch` violation per locked file that changed."""
    return [
        Violation(
            rule="lock.hash_mismatch",
            path=path,
            message=f"locked file {path} was {_change_kind(before, after, path)} {when}",
        )
        for path in changed_paths(before, after)
    ]


def _change_kind(before: dict[str, str], after: dict[str, str], path: str) -> str:
    if path not in before:
        return "created"
    return "deleted" if path not in after else "modified"
