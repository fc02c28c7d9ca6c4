"""Static rules: what S and T may reach and do, judged from their source without running it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from guardrails.static.astscan import (
        Finding,
        dotted,
        import_map,
        parse,
        to_violations,
        too_deep,
        under,
    )
    from guardrails.static.capabilities import Policy
    from guardrails.static.discipline import discipline_findings
    from guardrails.static.sanitizer import findings, scan_source, scan_tree
    from guardrails.static.sourcetext import read_source
    from guardrails.static.testquality import count_tests, scan_tests, with_siblings
    from guardrails.static.weakening import NODE_ID

__all__ = [
    "Finding",
    "NODE_ID",
    "Policy",
    "count_tests",
    "discipline_findings",
    "dotted",
    "findings",
    "import_map",
    "parse",
    "read_source",
    "scan_source",
    "scan_tests",
    "scan_tree",
    "to_violations",
    "too_deep",
    "under",
    "with_siblings",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a name missing there is an error, not Any
    __getattr__ = front_door(__name__, __file__)
