"""Strict unified-diff parsing: every line must belong to an entry, then unidiff parses each
entry."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from unidiff import PatchedFile, PatchSet
from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk

from guardrails.errors import PatchError

DEV_NULL = "/dev/null"
MAX_PATCH_CHARS = 4_000_000  # far above diffs.PatchLimits; bounds the parser's own work
SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_HEADER = re.compile(r"^diff --git (\S+) (\S+)$")
_EXTENDED = re.compile(
    r"^(index [0-9a-fA-F]+\.\.[0-9a-fA-F]+( \d+)?|old mode \d+|new mode \d+|deleted file mode \d+"
    r"|new file mode \d+|similarity index \d+%|dissimilarity index \d+%|rename from .+|rename to .+"
    r"|copy from .+|copy to .+)$"
)
_HEADER_KEYS = (
    "old mode",
    "new mode",
    "deleted file mode",
    "new file mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
)
_BINARY_MARKERS = ("GIT binary patch", "Binary files ")


@dataclass
class FileChange:
    """One file entry of a patch: normalized names and flags.

    a/ and b/ are stripped; /dev/null is None.
    """

    patched: PatchedFile
    raw_source: str
    raw_target: str
    headers: dict[str, str] = field(default_factory=dict)
    is_binary: bool = False
    is_git: bool = False
    size: int = 0
    first_line: int = 1

    @property
    def source_path(self) -> str | None:
        return _strip_prefix(self.raw_source, "a/")

    @property
    def target_path(self) -> str | None:
        return _strip_prefix(self.raw_target, "b/")

    @property
    def path(self) -> str:
        """The path the entry writes: the target, or the source for deletions."""
        return self.target_path or self.source_path or ""

    @property
    def paths(self) -> list[str]:
        """Every distinct path the entry names (both sides)."""
        return sorted({p for p in (self.source_path, self.target_path) if p})

    @property
    def is_added(self) -> bool:
        return self.raw_source == DEV_NULL

    @property
    def is_removed(self) -> bool:
        return self.raw_target == DEV_NULL

    @property
    def is_rename(self) -> bool:
        return "rename from" in self.headers or "rename to" in self.headers

    @property
    def is_copy(self) -> bool:
        return "copy from" in self.headers or "copy to" in self.headers

    @property
    def modes(self) -> list[str]:
        keys = ("old mode", "new mode", "new file mode", "deleted file mode")
        return [self.headers[k] for k in keys if k in self.headers]

    @property
    def is_symlink(self) -> bool:
        return SYMLINK_MODE in self.modes

    @property
    def mode_change(self) -> tuple[str, str] | None:
        """(old, new) when the entry changes or sets a non-regular mode, else None."""
        if "old mode" in self.headers or "new mode" in self.headers:
            return self.headers.get("old mode", ""), self.headers.get("new mode", "")
        created = self.headers.get("new file mode")
        if created is not None and created != "100644":
            return "", created
        return None

    @property
    def hunks(self) -> list[Hunk]:
        return list(self.patched)


def _strip_prefix(name: str, prefix: str) -> str | None:
    if name == DEV_NULL:
        return None
    return name.removeprefix(prefix)


@dataclass
class _Entry:
    start: int  # 0-based index of the entry's first line
    end: int = 0
    git_names: tuple[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    binary: bool = False


def _header_item(line: str) -> tuple[str, str]:
    """Split an extended git header line into (key, value), e.g. ("rename from", "a.py")."""
    for key in _HEADER_KEYS:
        if line.startswith(key + " "):
            return key, line[len(key) + 1 :]
    return "index", line[len("index ") :]


def _counted_length(lines: list[str], i: int, old_left: int, new_left: int) -> int | None:
    """Length of the hunk at lines[i] if its body matches the header's counts exactly.

    Else None.
    """
    j = i + 1
    while old_left or new_left:
        kind = lines[j][:1] if j < len(lines) else "?"
        if kind in (" ", ""):
            old_left, new_left = old_left - 1, new_left - 1
        elif kind == "-":
            old_left -= 1
        elif kind == "+":
            new_left -= 1
        elif kind != "\\":
            return None
        if old_left < 0 or new_left < 0:
            return None
        j += 1
    while j < len(lines) and lines[j].startswith("\\"):
        j += 1
    return j - i


def _boundary(lines: list[str], j: int) -> bool:
    """True where a new hunk or file entry starts."""
    return (
        lines[j].startswith("@@")
        or bool(_GIT_HEADER.match(lines[j]))
        or (lines[j].startswith("--- ") and j + 1 < len(lines) and lines[j + 1].startswith("+++ "))
    )


def _recount(lines: list[str], i: int, header: re.Match[str]) -> int:
    """Count a hunk whose header numbers are wrong (a common LLM slip) and rewrite its header.

    The body runs to the next hunk or entry. Blank lines before that boundary are separators.
    """
    j, old, new = i + 1, 0, 0
    while j < len(lines) and not _boundary(lines, j):
        kind = lines[j][:1]
        if not lines[j]:
            k = j
            while k < len(lines) and not lines[k]:
                k += 1
            if k >= len(lines) or _boundary(lines, k):
                break
            # Empty context lines whose single space was stripped
            old, new = (old + k - j, new + k - j)
            j = k
            continue
        if kind == " ":
            old, new = old + 1, new + 1
        elif kind == "-":
            old += 1
        elif kind == "+":
            new += 1
        elif kind != "\\":
            break  # not hunk text: the caller reports it
        j += 1
    if not old and not new:
        if j < len(lines) and lines[j] and not _boundary(lines, j):
            raise PatchError(f"line {j + 1}: {lines[j]!r} is not a hunk line")
        raise PatchError(f"line {i + 1}: hunk {lines[i]!r} has no lines")
    lines[i] = f"@@ -{header.group(1)},{old} +{header.group(3)},{new} @@{lines[i][header.end() :]}"
    return j - i


def _hunk_length(lines: list[str], i: int) -> int:
    """Number of lines of the hunk whose header is lines[i].

    Header and trailing markers are included. Wrong header counts are repaired by recounting the
    body.
    """
    match = _HUNK_HEADER.match(lines[i])
    if match is None:
        raise PatchError(f"line {i + 1}: malformed hunk header {lines[i]!r}")
    counted = _counted_length(lines, i, int(match.group(2) or "1"), int(match.group(4) or "1"))
    if counted is None:
        return _recount(lines, i, match)
    after = i + counted
    while after < len(lines) and not lines[after]:
        after += 1
    if after < len(lines) and lines[after][:1] in (" ", "-", "+") and not _boundary(lines, after):
        return _recount(lines, i, match)  # the body goes on past the header's counts
    return counted


def _scan_entries(lines: list[str]) -> list[_Entry]:
    """Split the patch into entries; any text that belongs to no entry raises PatchError."""
    entries: list[_Entry] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1  # blank lines between entries carry nothing and hide nothing
            continue
        git = _GIT_HEADER.match(line)
        if git is None and not (
            line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        ):
            where = "before the first entry" if not entries else "between or after entries"
            raise PatchError(f"line {i + 1}: unexpected text {where}: {line[:80]!r}")
        entry = _Entry(start=i)
        if git is not None:
            entry.git_names = (git.group(1), git.group(2))
            i += 1
            while i < len(lines) and _EXTENDED.match(lines[i]):
                entry.headers.update([_header_item(lines[i])])
                i += 1
            if i < len(lines) and lines[i].startswith(_BINARY_MARKERS):
                entry.binary = True
                i += 1
                while i < len(lines) and not _GIT_HEADER.match(lines[i]):
                    i += 1
                entry.end = i
                entries.append(entry)
                continue
            if not (i < len(lines) and lines[i].startswith("--- ")):
                entry.end = i  # header-only entry: rename, copy, mode change or empty file
                entries.append(entry)
                continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"line {i + 1}: '---' line without a following '+++' line")
        i += 2
        if i >= len(lines) or not lines[i].startswith("@@"):
            raise PatchError(f"line {i + 1}: file entry without any hunk")
        while i < len(lines) and lines[i].startswith("@@"):
            i += _hunk_length(lines, i)
            after = i
            while after < len(lines) and not lines[after].strip():
                after += 1  # blank lines between two hunks of one file are dropped
            if after < len(lines) and lines[after].startswith("@@"):
                del lines[i:after]
        entry.end = i
        entries.append(entry)
    return entries


def _names_of(entry: _Entry, patched: PatchedFile | None) -> tuple[str, str]:
    if patched is not None and patched.source_file and patched.target_file:
        return patched.source_file, patched.target_file
    assert entry.git_names is not None  # header-only entries always come from a git header
    source, target = entry.git_names
    if "new file mode" in entry.headers:
        source = DEV_NULL
    if "deleted file mode" in entry.headers:
        target = DEV_NULL
    return source, target


def parse_patch(text: str) -> list[FileChange]:
    """Parse a unified diff strictly.

    Raise PatchError on any text that is not part of an entry.
    """
    if len(text) > MAX_PATCH_CHARS:
        raise PatchError(
            f"the patch has {len(text)} characters; at most {MAX_PATCH_CHARS} are read"
        )
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not any(line.strip() for line in lines):
        raise PatchError("the patch is empty")
    changes: list[FileChange] = []
    for entry in _scan_entries(lines):
        body = lines[entry.start : entry.end]
        chunk = "\n".join(body) + "\n"
        patched: PatchedFile | None = None
        if not entry.binary:
            try:
                parsed = PatchSet(chunk)
            except UnidiffParseError as exc:
                raise PatchError(f"line {entry.start + 1}: {exc}") from None
            if len(parsed) > 1:
                raise PatchError(
                    f"line {entry.start + 1}: the 'diff --git' names and the "
                    "'---'/'+++' names of this entry disagree"
                )
            patched = parsed[0] if parsed else None
        source, target = _names_of(entry, patched)
        if patched is None:
            patched = PatchedFile(None, source, target, is_binary_file=entry.binary)
        changes.append(
            FileChange(
                patched=patched,
                raw_source=source,
                raw_target=target,
                headers=entry.headers,
                is_binary=entry.binary,
                is_git=entry.git_names is not None,
                size=len(chunk.encode()),
                first_line=entry.start + 1,
            )
        )
    return changes
