"""The agent's patch: strict parsing, the diff gate's scope checks, the apply inside a scratch
root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from guardrails.errors import PatchError
    from guardrails.patch.apply import ApplyResult, added_lines, apply_patch
    from guardrails.patch.diffs import check_patch
    from guardrails.patch.parse import FileChange, parse_patch

__all__ = [
    "ApplyResult",
    "FileChange",
    "PatchError",
    "added_lines",
    "apply_patch",
    "check_patch",
    "parse_patch",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a name missing there is an error, not Any
    __getattr__ = front_door(__name__, __file__)
