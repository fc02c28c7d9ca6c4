"""The repository stands on its own: no code or document refers to a file outside it."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Generated or installed trees, never written by hand.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    ".venv-bench",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "htmlcov",
    "build",
    "dist",
    "test-artifacts",
    "results",
    "node_modules",
}
MAX_BYTES = 2_000_000  # data files above this are generated snapshots, not prose or code
# Documents that lived beside the repository once (a design and a benchmark brief, a shared data
# folder); their content now lives in docs/architecture.md, docs/bench.md and data/sample/.
OUTSIDE = re.compile(
    r"\.\./shared\b|\bshared/(?:data|BENCH|DESIGN)|\bDESIGN(?:\.md| §)|\bBENCH\.md"
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def text_files(root: Path) -> list[Path]:
    """Every hand-written text file under `root` (binary and generated files skipped)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or path.stat().st_size > MAX_BYTES:
                continue
            data = path.read_bytes()
            if b"\0" not in data:
                found.append(path)
    return found


def outside_references(root: Path) -> list[str]:
    """`path:line: text` for each mention of an outside file and each markdown link leaving
    `root`."""
    problems = []
    for path in text_files(root):
        if path == Path(__file__).resolve():
            continue  # this file names the patterns it looks for
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{path.relative_to(root)}:{number}"
            if OUTSIDE.search(line):
                problems.append(f"{where}: {line.strip()[:120]}")
            if path.suffix != ".md":
                continue
            for target in MARKDOWN_LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
                    continue  # a URL or an anchor on the same page
                resolved = (path.parent / target.split("#")[0]).resolve()
                if not resolved.is_relative_to(root.resolve()):
                    problems.append(f"{where}: link {target} leaves the repository")
    return problems


def test_no_file_refers_to_anything_outside_the_repository() -> None:
    problems = outside_references(REPO)
    assert not problems, "references to files outside the repository:\n" + "\n".join(problems)


def test_the_scan_finds_an_outside_reference(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ops.md").write_text(
        "Contracts: [design](../../shared/DESIGN.md).\n"
        "Inside: [gate](gate.md), [web](https://example.org).\n"
    )
    (tmp_path / "tool.py").write_text('"""Arguments of DESIGN §4.2."""\n')
    (tmp_path / "blob.bin").write_bytes(b"\0../shared/DESIGN.md")
    assert sorted(outside_references(tmp_path)) == [
        "docs/ops.md:1: Contracts: [design](../../shared/DESIGN.md).",
        "docs/ops.md:1: link ../../shared/DESIGN.md leaves the repository",
        'tool.py:1: """Arguments of DESIGN §4.2."""',
    ]
