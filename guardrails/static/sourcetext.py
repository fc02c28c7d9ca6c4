"""Source bytes read exactly as CPython reads them, or refused when the gate could misread them.

CPython decodes a module with its encoding declaration (or BOM). It translates every line ending
(CRLF and a lone CR) to a newline before it tokenizes. The gate's tools split lines on LF alone.
Some Python functions (`str.splitlines`) also split on form feeds and Unicode separators. So a
source is accepted only in a form where all of these readings agree. That is UTF-8, no NUL byte,
no lone CR. No character may be one that any of those readers treats as a line break, except LF.
A form feed may appear only at the start of a line. CPython treats it there as
indentation-neutral whitespace. With that, the lines the gate checks are the ones the interpreter
runs, and so are the tokens.
"""

from __future__ import annotations

import codecs
import re

from guardrails.verdict import Violation

# PEP 263: a comment on line 1 or 2 declaring the encoding.
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK = re.compile(rb"^[ \t\f]*(?:[#\r\n]|$)")
# Characters some reader treats as a line break where CPython does not.
# FF is allowed at line start.
_ODD_BREAK = re.compile("\r(?!\n)|[\x0b\x1c\x1d\x1e\x85\u2028\u2029]|(?<=[^\n])\x0c")
_UTF8 = ("utf-8", "utf-8-sig")


def declared_encoding(data: bytes) -> str | None:
    """The encoding the interpreter would use from a cookie on line 1 or 2 (None: the default)."""
    lines = data.split(b"\n", 2)
    for index, line in enumerate(lines[:2]):
        match = _COOKIE.match(line)
        if match:
            name = match.group(1).decode("latin-1")
            try:
                return codecs.lookup(name).name
            except LookupError:
                return name
        if index == 0 and not _BLANK.match(line):
            return None  # a cookie on line 2 counts only after a blank or comment line 1
    return None


def read_source(path: str, data: bytes, prefix: str) -> tuple[str | None, list[Violation]]:
    """(text, []) when the gate and CPython read `data` alike, else (None, [violation])."""

    def refuse(rule: str, message: str, line: int | None = None) -> tuple[None, list[Violation]]:
        return None, [Violation(rule=f"{prefix}.{rule}", path=path, line=line, message=message)]

    encoding = declared_encoding(data)
    if encoding is not None and encoding not in _UTF8:
        return refuse(
            "encoding",
            f"{path} declares the encoding {encoding!r}: only UTF-8 "
            "source is accepted (other codecs can hide code in what looks like text)",
        )
    if b"\0" in data:
        return refuse("source_mismatch", f"{path} contains a NUL byte")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return refuse("encoding", f"{path} is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    odd = _ODD_BREAK.search(text.replace("\r\n", "\n"))
    if odd:
        line = text.replace("\r\n", "\n").count("\n", 0, odd.start()) + 1
        return refuse(
            "source_mismatch",
            (
                f"{path} line {line} holds {odd.group()!r}, which some readers treat as a "
                "line break "
                "and the interpreter does not (or the reverse): the gate would check other lines "
                "than the ones that run"
            ),
            line,
        )
    return text.replace("\r\n", "\n"), []
