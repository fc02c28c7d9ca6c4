"""The repair's state machine as docs/agent.md draws it: the Mermaid edges and the test named for
each."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pytest

from oomrl.agent.machine import Trail
from oomrl.checkout import repo_root

# The diagram's short state names (Mermaid ids cannot hold "-") -> the machine's states.
STATE_OF = {
    "critic": "critic",
    "approval": "approval",
    "tests": "test-genesis",
    "logic": "logic-genesis",
    "crossval": "cross-validation",
    "promotion": "promotion",
    "promoted": "promoted",
    "probation": "probation",
    "retired": "retired",
    "rejected": "rejected",
    "failed": "failed",
}
Edge = tuple[str, str]


def doc_text() -> str:
    return (repo_root() / "docs" / "agent.md").read_text(encoding="utf-8")


def drawn_edges(doc: str) -> set[Edge]:
    """Every `a --> b` of the Mermaid state diagram, in the machine's state names ([*] left out)."""
    diagram = doc.split("```mermaid", 1)[1].split("```", 1)[0]
    return {
        (STATE_OF[a], STATE_OF[b])
        for a, b in re.findall(r"^\s*(\w+) --> (\w+)", diagram, re.MULTILINE)
    }


def edge_table(doc: str) -> dict[Edge, list[str]]:
    """The transition table: each edge and the tests it names as taking it."""
    table = doc.split("| transition | taken when | tested by |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([\w-]+) → ([\w-]+)` \| [^|]+ \| ([^|]+) \|$", table, re.MULTILINE)
    return {(a, b): re.findall(r"`(test_\w+)`", tests) for a, b, tests in rows}


@cache
def edges_of_test() -> dict[str, set[Edge]]:
    """test name -> the edges docs/agent.md says it takes (each such test checks it does)."""
    named: dict[str, set[Edge]] = {}
    for edge, tests in edge_table(doc_text()).items():
        for test in tests:
            named.setdefault(test, set()).add(edge)
    return named


@contextmanager
def takes_documented_edges(test: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[set[Edge]]:
    """Observe every move of every repair run inside (the real move still happens); on leaving, fail
    when `test` did not take each edge docs/agent.md names it for. Yields the edges taken."""
    expected = edges_of_test().get(test, set())
    taken: set[Edge] = set()
    move = Trail.move

    def observed(trail: Trail, target: str, reason: str) -> None:
        source = trail.state
        move(trail, target, reason)
        taken.add((source, target))

    with monkeypatch.context() as patch:
        patch.setattr(Trail, "move", observed)
        yield taken
    missing = sorted(expected - taken)
    assert not missing, f"docs/agent.md says {test} takes {missing}; it did not"
