"""RO-Lock anchoring: scratch copies and SHA-256 manifests of the locked trees."""

from __future__ import annotations

import os
import socket
from pathlib import Path

# The names guardrails/gate.py imports too: this file tests each of them.
from guardrails.sandbox.anchoring import (
    changed_paths,
    hash_violations,
    lock_manifest,
    manifest_digest,
    scratch_copy,
    tree_manifest,
)


def _tree(root: Path) -> Path:
    (root / "strategies").mkdir(parents=True)
    (root / "strategies" / "a.py").write_text("A = 1\n")
    (root / "tests" / "__pycache__").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    (root / "tests" / "__pycache__" / "test_a.cpython-311.pyc").write_bytes(b"\0")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")
    (root / "tests" / "conftest.py").write_text("")
    (root / "strategies" / "extra.pth").write_text("import os\n")
    (root / "pyproject.toml").write_text("[tool]\n")
    (root / ".coverage").write_text("data")
    return root


def test_scratch_copy_drops_vcs_caches_and_escaping_symlinks(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    (tmp_path / "outside.txt").write_text("secret")
    (src / "strategies" / "escape.txt").symlink_to(tmp_path / "outside.txt")
    (src / "strategies" / "inside.py").symlink_to(src / "strategies" / "a.py")
    scratch_copy(src, tmp_path / "dst")
    copied = sorted(tree_manifest(tmp_path / "dst"))
    assert copied == [
        "pyproject.toml",
        "strategies/a.py",
        "strategies/extra.pth",
        "strategies/inside.py",
        "tests/conftest.py",
        "tests/test_a.py",
    ]
    assert (tmp_path / "dst" / "strategies" / "inside.py").is_symlink()


def test_scratch_copy_leaves_out_sockets_and_fifos(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "strategies").mkdir(parents=True)
    (src / "strategies" / "a.py").write_text("A = 1\n")
    os.mkfifo(src / "strategies" / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(src / "strategies" / "s.sock"))
    try:
        scratch_copy(src, tmp_path / "dst")
    finally:
        server.close()
    assert sorted(tree_manifest(tmp_path / "dst")) == ["strategies/a.py"]


def test_lock_manifest_covers_locked_trees_and_every_config_file(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    manifest = lock_manifest(root, ["tests"])
    assert {
        "tests/test_a.py",
        "tests/conftest.py",
        "strategies/extra.pth",
        "pyproject.toml",
    } <= set(manifest)
    assert "strategies/a.py" not in manifest
    # caches inside a locked tree are anchored too: a planted .pyc is a change
    assert "tests/__pycache__/test_a.cpython-311.pyc" in manifest


def test_manifest_differences_name_each_file_and_kind() -> None:
    before = {"a": "1", "b": "2", "c": "3"}
    after = {"a": "1", "b": "9", "d": "4"}
    assert changed_paths(before, after) == ["b", "c", "d"]
    messages = {v.path: v.message for v in hash_violations(before, after, "during the run")}
    assert "modified" in messages["b"] and "deleted" in messages["c"] and "created" in messages["d"]
    assert all(v.rule == "lock.hash_mismatch" for v in hash_violations(before, after, "x"))
    assert manifest_digest(before) == manifest_digest(dict(reversed(list(before.items()))))
    assert manifest_digest(before) != manifest_digest(after)


def test_symlinks_are_hashed_by_target(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "link").symlink_to("/etc/hostname")
    (tmp_path / "t" / "dirlink").symlink_to(tmp_path)
    manifest = tree_manifest(tmp_path / "t")
    assert manifest == {"link": "link:/etc/hostname", "dirlink": f"link:{tmp_path}"}
