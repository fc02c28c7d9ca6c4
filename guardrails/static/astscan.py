"""Shared AST plumbing for the sanitizer and the test-quality rules: imports, dotted names, new
findings."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from guardrails.verdict import Violation


@dataclass(frozen=True)
class Finding:
    """One rule hit before it becomes a Violation.

    `snippet` identifies it across old and new text.
    """

    rule: str
    line: int
    snippet: str
    message: str


def parse(path: str, text: str, rule: str) -> tuple[ast.Module | None, list[Violation]]:
    """The module's AST, or None and a `<prefix>.syntax_error` violation naming the line."""
    try:
        return ast.parse(text, filename=path), []
    except RecursionError:
        return None, too_deep(path, rule)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        message = getattr(exc, "msg", str(exc))
        return None, [
            Violation(rule=rule, path=path, line=line, message=f"cannot parse {path}: {message}")
        ]


def too_deep(path: str, rule: str) -> list[Violation]:
    """The violation for code nested too deeply for the checks to walk (rejected, never skipped)."""
    return [
        Violation(
            rule=rule,
            path=path,
            line=None,
            message=f"cannot check {path}: its code nests too deeply",
        )
    ]


def import_map(nodes: Iterable[ast.AST]) -> dict[str, str]:
    """Local name -> dotted module or object it is bound to by import statements among `nodes`."""
    names: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    names[head] = head
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    return names


def dotted(node: ast.AST, imports: dict[str, str]) -> str | None:
    """`a.b.c` with the head resolved through imports (`np.x` -> `numpy.x`), or None if not a
    chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(imports.get(node.id, node.id))
    return ".".join(reversed(parts))


def under(name: str, prefixes: frozenset[str] | tuple[str, ...]) -> str | None:
    """The prefix `name` equals or lies below (`os.path.join` is under `os.path`), else None."""
    for prefix in prefixes:
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    return None


def snippet(node: ast.AST) -> str:
    """Normalized source of a node.

    It matches a finding in the old text to the new one.
    """
    text = ast.unparse(node)
    return text if len(text) <= 120 else text[:117] + "..."


def only_new(new: list[Finding], old: list[Finding]) -> list[Finding]:
    """Findings of the new text not already present in the old text.

    They are compared as a multiset by rule and snippet.
    """
    budget = Counter((f.rule, f.snippet) for f in old)
    fresh: list[Finding] = []
    for finding in new:
        key = (finding.rule, finding.snippet)
        if budget[key] > 0:
            budget[key] -= 1
        else:
            fresh.append(finding)
    return fresh


def to_violations(findings: list[Finding], path: str, allow: set[str]) -> list[Violation]:
    """One Violation per (rule, line), skipping rules the workspace allows, sorted by line."""
    seen: set[tuple[str, int]] = set()
    out: list[Violation] = []
    for finding in sorted(findings, key=lambda f: (f.line, f.rule)):
        if finding.rule in allow or (finding.rule, finding.line) in seen:
            continue
        seen.add((finding.rule, finding.line))
        out.append(
            Violation(rule=finding.rule, path=path, line=finding.line, message=finding.message)
        )
    return out
