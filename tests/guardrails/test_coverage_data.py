"""Coverage as people write it: the gate's exclusions, dead version branches, stubs, mapped data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from guardrails.coverage_data import (
    RCFILE,
    CoverageReader,
    function_body_lines,
    map_data,
    version_dead_lines,
)

MODULE = '''import sys
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from collections.abc import Iterable
if sys.version_info >= (3, 8):
    from math import fsum
else:
    fsum = sum
try:
    from math import prod
except ImportError:
    prod = None


@overload
def share(count: int) -> float: ...
@overload
def share(count: float) -> float: ...
def share(count):
    return 1.0 / count if count else 0.0


class Scheme:
    def weight(self, n):
        raise NotImplementedError


def total(values):
    return fsum(values) * prod([1])


if __name__ == "__main__":
    print(total([1.0]))
'''


def measured(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "m.py").write_text(MODULE)
    (tmp_path / "run.py").write_text("import m\nassert m.total([1.0, 2.0]) == 3.0\n"
                                     "assert m.share(2) == 0.5\n")
    (tmp_path / "gate.rc").write_text(RCFILE)
    subprocess.run([sys.executable, "-m", "coverage", "run", "--rcfile", "gate.rc", "--source",
                    str(tmp_path), "run.py"], cwd=tmp_path, check=True, capture_output=True)
    return tmp_path / ".coverage", tmp_path / "gate.rc"


def test_standard_exclusions_and_dead_version_branches(tmp_path: Path) -> None:
    data, rc = measured(tmp_path)
    reader = CoverageReader(data, rc)
    module = tmp_path / "m.py"
    dead = version_dead_lines(MODULE)
    assert dead == {9}  # `fsum = sum` never runs on this interpreter
    assert reader.missing_lines(module) == {9}  # stubs, abstract, compat fallback, main excluded
    assert reader.branch_percent([module]) < 100.0
    assert reader.branch_percent([module], {module: dead}) == 100.0
    assert reader.branch_percent([module], {module: set()}) == reader.branch_percent([module])


def test_version_tests_the_gate_evaluates() -> None:
    assert version_dead_lines("import sys\nif sys.version_info < (3, 0):\n    A = 1\nelse:\n"
                              "    A = 2\n") == {3}
    assert version_dead_lines("import sys\nif sys.version_info == (2,):\n    A = 1\n") == {3}
    assert version_dead_lines("import sys\nif sys.version_info >= (x, 1):\n    A = 1\n") == set()
    assert version_dead_lines("if flag:\n    A = 1\n") == set()
    assert version_dead_lines("import sys\nif sys.version_info in ((3, 11),):\n    A = 1\n") \
        == set()


def test_bodies_on_the_def_line_are_not_function_bodies() -> None:
    assert function_body_lines("def f(x: int) -> int: ...\n") == set()
    assert function_body_lines("def f(x): return (\n    x)\n") == {2}


def test_data_is_mapped_from_the_sandbox_paths_to_the_host(tmp_path: Path) -> None:
    data, rc = measured(tmp_path)
    mapped = map_data(data, tmp_path / "mapped", str(tmp_path), tmp_path / "host")
    reader = CoverageReader(mapped, rc)
    assert str(tmp_path / "host" / "m.py") in reader.data.measured_files()
