"""Each room of guardrails/ opens by one front door: its `__all__`, each name loaded from its
home."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from guardrails.lazy import homes

REPO = Path(__file__).resolve().parents[2]
DOORS = ("patch", "static", "sandbox", "judging")


@pytest.mark.parametrize("room", DOORS)
def test_a_front_door_opens_on_every_name_it_states(room: str) -> None:
    package = importlib.import_module(f"guardrails.{room}")
    found = homes(str(package.__file__))
    assert found and sorted(package.__all__) == sorted(found)
    for name, home in found.items():
        assert getattr(package, name) is getattr(importlib.import_module(home), name)


def test_a_front_door_refuses_a_name_it_does_not_state() -> None:
    sandbox = importlib.import_module("guardrails.sandbox")
    with pytest.raises(AttributeError, match="has no attribute 'SANDBOX_UID'"):
        getattr(sandbox, "SANDBOX_UID")  # noqa: B009 - a name of bwrap, which the door does not state


def test_the_child_room_states_only_the_launcher() -> None:
    child = importlib.import_module("guardrails.child")
    assert child.__all__ == ["childrun"]
    assert importlib.import_module("guardrails.child.childrun").__file__.endswith(
        "/child/childrun.py"
    )


@pytest.mark.parametrize("room", DOORS)
def test_a_front_door_imports_no_room_up_front(room: str) -> None:
    tree = ast.parse((REPO / "guardrails" / room / "__init__.py").read_text(encoding="utf-8"))
    eager = [
        ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert eager == [
        "from __future__ import annotations",
        "from typing import TYPE_CHECKING",
        "from guardrails.lazy import front_door",
    ]


@pytest.mark.slow
def test_a_light_caller_of_a_front_door_loads_no_test_runner() -> None:
    # The sandbox's runner imports the launcher, which imports pytest and coverage: a caller that
    # wants the lock names or the temp-dir note must not pay for them (the CLI's --help, scratch).
    code = (
        "import sys; from guardrails.sandbox import LOCKS, OWNER_NOTE; "
        "print(sorted({'pytest', 'coverage', 'guardrails.sandbox.runner'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[]"
