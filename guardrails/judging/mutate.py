"""Simple mutants of source code (comparison, arithmetic, constant, return flips) for the test-gen
check."""

from __future__ import annotations

import ast
from dataclasses import dataclass

COMPARISON_FLIPS: dict[type, tuple[str, str]] = {
    ast.Lt: ("<", ">="),
    ast.GtE: (">=", "<"),
    ast.Gt: (">", "<="),
    ast.LtE: ("<=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
}
ARITHMETIC_FLIPS: dict[type, tuple[str, str]] = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "/"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"),
    ast.Mod: ("%", "*"),
}
BOOL_FLIPS: dict[type, tuple[str, str]] = {ast.And: ("and", "or"), ast.Or: ("or", "and")}


@dataclass(frozen=True)
class Mutant:
    """One mutated copy of the module: what changed, on which line, and the full mutated text."""

    description: str
    line: int
    text: str


@dataclass(frozen=True)
class _Edit:
    line: int
    start: int  # absolute byte offsets into the source
    end: int
    replacement: str
    description: str


class _Offsets:
    """(line, byte column) -> absolute byte offset, since ast columns count UTF-8 bytes."""

    def __init__(self, data: bytes) -> None:
        self.starts = [0]
        for index, byte in enumerate(data):
            if byte == 0x0A:
                self.starts.append(index + 1)

    def at(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column


def _skipped_ids(tree: ast.Module) -> set[int]:
    """Nodes never mutated: docstrings, annotations and `from __future__` imports."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):  # f-string parts carry unreliable positions
            skipped.update(id(n) for n in ast.walk(node))
        annotations = [getattr(node, "returns", None), getattr(node, "annotation", None)]
        for annotation in annotations:
            if annotation is not None:
                skipped.update(id(n) for n in ast.walk(annotation))
    return skipped


def _operator_edit(
    data: bytes,
    offsets: _Offsets,
    left: ast.expr,
    right: ast.expr,
    flip: tuple[str, str],
    kind: str,
) -> _Edit:
    """Replace the operator token that sits between `left` and `right`."""
    gap_start = offsets.at(left.end_lineno or left.lineno, left.end_col_offset or 0)
    gap_end = offsets.at(right.lineno, right.col_offset)
    gap = data[gap_start:gap_end].decode("utf-8")
    old, new = flip
    index = gap.index(old)  # the gap holds only blanks, brackets and this one operator
    start = gap_start + len(gap[:index].encode("utf-8"))
    return _Edit(
        left.lineno, start, start + len(old.encode("utf-8")), new, f"{kind}: {old} -> {new}"
    )


def _node_edit(offsets: _Offsets, node: ast.expr, replacement: str, description: str) -> _Edit:
    start = offsets.at(node.lineno, node.col_offset)
    end = offsets.at(node.end_lineno or node.lineno, node.end_col_offset or 0)
    return _Edit(node.lineno, start, end, replacement, description)


def _edits(tree: ast.Module, data: bytes) -> list[_Edit]:
    offsets = _Offsets(data)
    skipped = _skipped_ids(tree)
    edits: list[_Edit] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
                edits.append(
                    _operator_edit(
                        data, offsets, left, right, COMPARISON_FLIPS[type(op)], "comparison"
                    )
                )
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC_FLIPS:
            edits.append(
                _operator_edit(
                    data,
                    offsets,
                    node.left,
                    node.right,
                    ARITHMETIC_FLIPS[type(node.op)],
                    "arithmetic",
                )
            )
        elif isinstance(node, ast.AugAssign) and type(node.op) in ARITHMETIC_FLIPS:
            old, new = ARITHMETIC_FLIPS[type(node.op)]
            edits.append(
                _operator_edit(
                    data, offsets, node.target, node.value, (old + "=", new + "="), "arithmetic"
                )
            )
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)) and not isinstance(
            node.test, (ast.Compare, ast.BoolOp, ast.UnaryOp)
        ):
            test = ast.get_source_segment(data.decode("utf-8"), node.test) or ""
            edits.append(_node_edit(offsets, node.test, f"(not ({test}))", "condition: negated"))
        elif isinstance(node, ast.BoolOp):
            flip = BOOL_FLIPS[type(node.op)]
            edits.append(
                _operator_edit(data, offsets, node.values[0], node.values[1], flip, "boolean")
            )
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            operand = ast.get_source_segment(data.decode("utf-8"), node.operand) or ""
            sign = "not" if isinstance(node.op, ast.Not) else "-"
            edits.append(_node_edit(offsets, node, f"({operand})", f"unary: drop {sign}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            edits.append(
                _node_edit(
                    offsets,
                    node,
                    str(not node.value),
                    f"constant: {node.value} -> {not node.value}",
                )
            )
        # Huge floats absorb +1: an equivalent mutant
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and (node.value + 1 != node.value)
        ):
            bumped = node.value + 1
            edits.append(
                _node_edit(offsets, node, repr(bumped), f"constant: {node.value!r} -> {bumped!r}")
            )
        elif (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            edits.append(_node_edit(offsets, node.value, "None", "return: value -> None"))
            if isinstance(node.value, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call, ast.Name)):
                source = ast.get_source_segment(data.decode("utf-8"), node.value) or ""
                edits.append(
                    _node_edit(offsets, node.value, f"(not ({source}))", "return: value -> negated")
                )
    return edits


def generate_mutants(source_text: str, lines: set[int] | None, limit: int) -> list[Mutant]:
    """Up to `limit` compilable mutants on `lines` (all lines if None), in source order, spread
    evenly."""
    try:
        tree = ast.parse(source_text)
    except (SyntaxError, RecursionError):
        return []
    data = source_text.encode("utf-8")
    edits = sorted(
        {(e.line, e.start, e.description): e for e in _edits(tree, data)}.values(),
        key=lambda e: (e.line, e.start, e.description),
    )
    mutants: list[Mutant] = []
    for edit in edits:
        if lines is not None and edit.line not in lines:
            continue
        text = (data[: edit.start] + edit.replacement.encode("utf-8") + data[edit.end :]).decode(
            "utf-8"
        )
        try:
            compile(text, "<mutant>", "exec")
        except (SyntaxError, RecursionError):
            continue
        mutants.append(Mutant(edit.description, edit.line, text))
    if limit <= 0:
        return []
    if len(mutants) <= limit:
        return mutants
    step = len(mutants) / limit
    return [mutants[int(i * step)] for i in range(limit)]
