"""Apply parsed diff entries inside a root folder, tolerating line-number drift, never through
symlinks."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from unidiff.patch import Hunk

from guardrails.patch.parse import FileChange
from guardrails.verdict import Violation

NEAR = 60  # lines around the stated position searched before the whole file


@dataclass
class ApplyResult:
    """Outcome of apply_patch: violations (empty when applied) and the line numbers it added per
    file."""

    violations: list[Violation] = field(default_factory=list)
    added_lines: dict[str, set[int]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass
class _Doc:
    """A text file being patched: its lines, which of them the patch added, its line ending."""

    lines: list[str]
    added: list[bool]
    eol: str = "\n"
    final_newline: bool = True

    @classmethod
    def from_text(cls, text: str) -> _Doc:
        eol = "\r\n" if "\r\n" in text.split("\n", 1)[0] + "\n" else "\n"
        final = text.endswith("\n") or text == ""
        body = text.removesuffix("\n")
        lines = [line.rstrip("\r") for line in body.split("\n")] if text else []
        return cls(lines=lines, added=[False] * len(lines), eol=eol, final_newline=final)

    def text(self) -> str:
        if not self.lines:
            return ""
        return self.eol.join(self.lines) + (self.eol if self.final_newline else "")


class _HunkFailed(Exception):
    """A hunk could not be placed; the message says why."""


class _Refused(Exception):
    """An entry the applier refuses outright, under a named rule."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def _body(hunk: Hunk) -> list[tuple[str, str]]:
    """(kind, text) of the hunk's content lines: kind is ' ', '-', '+' or '\\\\' (no-newline
    marker)."""
    return [
        (line.line_type, line.value.rstrip("\n").rstrip("\r"))
        for line in hunk
        if line.line_type in (" ", "-", "+", "\\")
    ]


def _matches(lines: list[str], old: list[str], at: int, loose: bool) -> bool:
    if at < 0 or at + len(old) > len(lines):
        return False
    if loose:
        return all(
            a.rstrip() == b.rstrip() for a, b in zip(lines[at : at + len(old)], old, strict=True)
        )
    return lines[at : at + len(old)] == old


def _locate(lines: list[str], old: list[str], expected: int, header: str) -> int:
    """Index where `old` sits: the stated place, else the unique nearest match (exact, then
    loose)."""
    if not old:
        return min(max(expected, 0), len(lines))
    for loose in (False, True):
        if _matches(lines, old, expected, loose):
            return expected
        first = old[0].rstrip() if loose else old[0]
        starts = [i for i, line in enumerate(lines) if (line.rstrip() if loose else line) == first]
        found = [i for i in starts if _matches(lines, old, i, loose)]
        if len(found) == 1:
            return found[0]
        if found:
            distances = sorted((abs(i - expected), i) for i in found)
            nearest, runner_up = distances[0], distances[1]
            if nearest[0] <= NEAR and nearest[0] < runner_up[0]:
                return nearest[1]
            raise _HunkFailed(
                f"hunk {header}: its context matches {len(found)} places "
                f"(lines {', '.join(str(i + 1) for _, i in distances[:5])}) and none "
                f"is uniquely nearest to line {expected + 1}"
            )
    shown = lines[expected] if 0 <= expected < len(lines) else "<end of file>"
    raise _HunkFailed(
        f"hunk {header}: its context and removed lines appear nowhere in the file "
        f"(expected {old[0]!r} at line {expected + 1}, found {shown!r})"
    )


def _apply_hunks(doc: _Doc, hunks: list[Hunk]) -> list[str]:
    """Apply hunks in order to `doc`.

    Return one failure message per hunk that could not be placed.
    """
    failures: list[str] = []
    shift = 0  # net lines added by placed hunks plus the drift of the last placement
    for hunk in hunks:
        body = _body(hunk)
        old = [text for kind, text in body if kind in (" ", "-")]
        header = (
            f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},"
            f"{hunk.target_length} @@"
        )
        stated = hunk.source_start if not old else hunk.source_start - 1
        try:
            at = _locate(doc.lines, old, stated + shift, header)
        except _HunkFailed as exc:
            failures.append(str(exc))
            continue
        new_lines: list[str] = []
        new_added: list[bool] = []
        cursor = at
        previous = ""
        for kind, text in body:
            if kind == " ":
                new_lines.append(doc.lines[cursor])
                new_added.append(doc.added[cursor])
                cursor += 1
            elif kind == "-":
                cursor += 1
            elif kind == "+":
                new_lines.append(text)
                new_added.append(True)
            elif at + len(old) >= len(doc.lines):  # a no-newline marker at the end of the file
                doc.final_newline = previous == "-"
            previous = kind
        if at + len(old) >= len(doc.lines) and body and body[-1][0] == "+":
            doc.final_newline = True
        doc.lines[at : at + len(old)] = new_lines
        doc.added[at : at + len(old)] = new_added
        shift = at - stated + len(new_lines) - len(old)
    return failures


def _refuse(rule: str, path: str, message: str) -> Violation:
    return Violation(rule=rule, path=path, line=None, message=message)


def _safe_path(root: Path, rel: str) -> Path:
    """root/rel after checking that no existing component is a symlink and it stays inside root."""
    parts = rel.split("/")
    if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise _Refused(
            "diff.unclean_path", f"{rel!r} is not a clean relative path in the workspace"
        )
    current = root
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break
        except NotADirectoryError:
            raise _HunkFailed(f"{rel}: a parent of it is a file, not a folder") from None
        if stat.S_ISLNK(mode):
            raise PermissionError(
                f"{current.relative_to(root)} is a symbolic link; the gate never "
                "writes through links"
            )
    # The whole path, also when its folders do not exist yet.
    # That is a new file in a new folder.
    return root.joinpath(*parts)


def _read(root: Path, rel: str) -> _Doc:
    path = _safe_path(root, rel)
    if not path.is_file():
        raise _HunkFailed(f"{rel} does not exist in the workspace")
    try:
        return _Doc.from_text(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise _HunkFailed(f"{rel} is not UTF-8 text") from None


def _write(root: Path, rel: str, doc: _Doc) -> None:
    path = _safe_path(root, rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    _safe_path(root, rel)  # the folders just created are ours; re-check nothing became a link
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(doc.text())


def _load(root: Path, rel: str, docs: dict[str, _Doc | None]) -> _Doc:
    if rel in docs:
        doc = docs[rel]
        if doc is None:
            raise _HunkFailed(f"{rel} was deleted by an earlier entry of this patch")
        return doc
    return _read(root, rel)


def _apply_change(change: FileChange, root: Path, docs: dict[str, _Doc | None]) -> list[str]:
    """Apply one entry to the in-memory overlay `docs`; return failure messages."""
    source, target = change.source_path, change.target_path
    plain_modify = not (change.is_added or change.is_removed or change.is_rename or change.is_copy)
    if plain_modify and source != target:
        raise _Refused("diff.name_mismatch", f"old name {source!r} and new name {target!r} differ")
    if change.is_binary or change.is_symlink:
        raise _Refused(
            "diff.binary" if change.is_binary else "diff.symlink",
            "binary and symbolic-link entries are never applied",
        )
    if change.is_added:
        assert target is not None
        if docs.get(target) is not None or (
            target not in docs and os.path.lexists(_safe_path(root, target))
        ):
            return [f"{target} already exists; a new-file entry cannot overwrite it"]
        doc = _Doc(lines=[], added=[])
    else:
        assert source is not None
        doc = _load(root, source, docs)
        if (change.is_rename or change.is_copy) and target != source:
            assert target is not None
            if docs.get(target) is not None or (
                target not in docs and os.path.lexists(_safe_path(root, target))
            ):
                return [f"{target} already exists; a rename or copy cannot overwrite it"]
            doc = _Doc(list(doc.lines), list(doc.added), doc.eol, doc.final_newline)
    failures = _apply_hunks(doc, change.hunks)
    if failures:
        return failures
    if change.is_removed:
        if doc.lines:
            return [
                (
                    f"deleting {source} requires removing all of its lines; "
                    f"{len(doc.lines)} would remain"
                )
            ]
        docs[source or ""] = None
        return []
    if change.is_rename and source != target:
        docs[source or ""] = None
    docs[target or ""] = doc
    return []


def apply_patch(changes: list[FileChange], root: Path) -> ApplyResult:
    """Apply all entries in `root` (all or nothing); report each hunk that cannot be placed."""
    root = Path(os.path.realpath(root))
    result = ApplyResult()
    docs: dict[str, _Doc | None] = {}
    for change in changes:
        try:
            failures = _apply_change(change, root, docs)
        except PermissionError as exc:
            result.violations.append(_refuse("diff.symlink_write", change.path, str(exc)))
            continue
        except _Refused as exc:
            result.violations.append(_refuse(exc.rule, change.path, str(exc)))
            continue
        except _HunkFailed as exc:
            failures = [str(exc)]
        result.violations += [
            _refuse("diff.hunk_failed", change.path, message) for message in failures
        ]
    if result.violations:
        return result
    for rel, doc in docs.items():
        if doc is None:
            _safe_path(root, rel).unlink()
            result.deleted.append(rel)
            continue
        try:
            _write(root, rel, doc)
        except (OSError, _HunkFailed) as exc:  # entries of this patch that clash with each other
            result.violations.append(
                _refuse("diff.write_failed", rel, f"cannot write {rel}: {exc}")
            )
            continue
        result.written.append(rel)
        result.added_lines[rel] = {i + 1 for i, added in enumerate(doc.added) if added}
    return result


def added_lines(changes: list[FileChange]) -> dict[str, set[int]]:
    """Target line numbers each entry adds as the hunk headers state them (before any drift)."""
    lines: dict[str, set[int]] = {}
    for change in changes:
        if change.target_path is None:  # a deletion adds nothing
            continue
        numbers = lines.setdefault(change.target_path, set())
        numbers.update(
            line.target_line_no
            for hunk in change.hunks
            for line in hunk
            if line.is_added and line.target_line_no is not None
        )
    return lines
