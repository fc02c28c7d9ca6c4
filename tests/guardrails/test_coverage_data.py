"""Coverage as people write it: the gate's exclusions, dead version branches, stubs, mapped data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from guardrails.sandbox.coverage_data import (
    RCFILE,
    CoverageReader,
    exact_exclusions,
    function_body_lines,
    map_data,
    version_dead_lines,
)

MODULE = '''import sys
from abc import ABC, abstractmethod
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


class Scheme(ABC):
    @abstractmethod
    def weight(self, n):
        """A weight."""
        raise NotImplementedError("subclasses weigh")


def total(values):
    return fsum(values) * prod([1])


if __name__ == "__main__":
    print(total([1.0]))
'''


def measured(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "m.py").write_text(MODULE)
    (tmp_path / "run.py").write_text(
        "import m\nassert m.total([1.0, 2.0]) == 3.0\nassert m.share(2) == 0.5\n"
    )
    (tmp_path / "gate.rc").write_text(RCFILE)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "coverage",
            "run",
            "--rcfile",
            "gate.rc",
            "--source",
            str(tmp_path),
            "run.py",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    return tmp_path / ".coverage", tmp_path / "gate.rc"


def test_standard_exclusions_and_dead_version_branches(tmp_path: Path) -> None:
    data, rc = measured(tmp_path)
    reader = CoverageReader(data, rc)
    module = tmp_path / "m.py"
    dead = version_dead_lines(MODULE)
    assert dead == {10}  # `fsum = sum` never runs on this interpreter
    # stubs, abstract, compat fallback, main and the dead version branch excluded by the gate
    assert set(reader.cov.analysis2(str(module))[3]) == {6, 10, 13, 14, 29, 37}
    assert reader.missing_lines(module) == set()
    assert reader.branch_percent([module]) == 100.0
    assert reader.branch_percent([module], {module: dead}) == 100.0


def test_pragmas_and_workspace_config_exclude_nothing(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def f(n):\n    if n > 50:  # pragma: no cover\n        return 2.0\n    return 1.0\n"
    )
    (tmp_path / ".coveragerc").write_text("[report]\nexclude_lines =\n    return 2.0\n")
    (tmp_path / "run.py").write_text("import m\nassert m.f(1) == 1.0\n")
    (tmp_path / "gate.rc").write_text(RCFILE)
    subprocess.run(
        [sys.executable, "-m", "coverage", "run", "--rcfile", "gate.rc", "run.py"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    reader = CoverageReader(tmp_path / ".coverage", tmp_path / "gate.rc")
    assert reader.missing_lines(tmp_path / "m.py") == {3}
    assert reader.branch_percent([tmp_path / "m.py"]) < 100.0


# Each attack hides a wrong branch in a form the old regular expressions excluded anywhere.
WRONG_BRANCHES = {
    "raise in a branch": "def f(n):\n    if n > 50:\n        raise NotImplementedError\n    "
    "return 1\n",
    "raise as a whole function": "def f(n):\n    raise NotImplementedError\n",
    "except tuple in a function": "def f(n):\n    try:\n        return 1 / n\n"
    "    except (ImportError, ZeroDivisionError):\n        return 2.0\n",
    "except ImportError in a function": "def f(n):\n    try:\n        import x\n"
    "    except ImportError:\n        return 2.0\n",
    "module try catching more": "try:\n    import x\nexcept (ImportError, OSError):\n    W = 2.0\n",
    "module fallback computing": "try:\n    import x\nexcept ImportError:\n    W = f(2.0)\n",
    "module try doing more than import": "try:\n    W = g()\nexcept ImportError:\n    W = 2.0\n",
    "ellipsis in a branch": "def f(n):\n    w = 2.0\n    if n > 50:\n        ...\n"
    "    else:\n        w = 1.0\n    return w\n",
    "ellipsis body of a plain function": "def f(n):\n    ...\n",
    "rebound TYPE_CHECKING": "from typing import TYPE_CHECKING\nTYPE_CHECKING = len(W) > 50\n"
    "if TYPE_CHECKING:\n    import x\n",
    "TYPE_CHECKING of another module": "from x import TYPE_CHECKING\nif TYPE_CHECKING:\n    "
    "import y\n",
    "TYPE_CHECKING guarding code": "import typing\nif typing.TYPE_CHECKING:\n    W = 2.0\n",
    "main guard in a function": "def f(n):\n    if __name__ == '__main__':\n        return 2.0\n",
    "main guard with a rebound name": "__name__ = '__main__'\nif __name__ == '__main__':\n    "
    "W = 2.0\n",
    "raise with a computed message": "from abc import abstractmethod\nclass A:\n    "
    "@abstractmethod\n"
    "    def f(self):\n        raise NotImplementedError(g())\n",
    "abstract method doing more": "from abc import abstractmethod\nclass A:\n    @abstractmethod\n"
    "    def f(self):\n        g()\n        raise NotImplementedError\n",
}


def test_only_the_exact_standard_forms_are_excluded() -> None:
    for name, text in WRONG_BRANCHES.items():
        assert exact_exclusions(text) == set(), name
    assert exact_exclusions(MODULE) == {5, 6, 10, 13, 14, 18, 20, 29, 36, 37}


def test_the_standard_forms_people_write() -> None:
    compat = "try:\n    import tomllib\nexcept ModuleNotFoundError:\n    import tomli as tomllib\n"
    assert exact_exclusions(compat) == {3, 4}
    assert exact_exclusions("try:\n    import x\nexcept ImportError:\n    x = None\n") == {3, 4}
    assert exact_exclusions(
        "try:\n    from math import fsum\nexcept ImportError:\n    fsum = sum\n"
    ) == {3, 4}
    protocol = (
        "from typing import Protocol\nclass P(Protocol):\n    def f(self) -> int:\n        ...\n"
    )
    assert exact_exclusions(protocol) == {4}
    assert exact_exclusions(
        "import abc\nclass A(abc.ABC):\n    @abc.abstractmethod\n"
        "    def f(self):\n        raise NotImplementedError\n"
    ) == {5}
    assert exact_exclusions("class A:\n    def f(self):\n        raise NotImplementedError\n") == {
        3
    }
    assert exact_exclusions("if __name__ == '__main__':\n    main()\n") == {1, 2}


def test_version_tests_the_gate_evaluates() -> None:
    assert version_dead_lines(
        "import sys\nif sys.version_info < (3, 0):\n    A = 1\nelse:\n    A = 2\n"
    ) == {3}
    assert version_dead_lines("import sys\nif sys.version_info == (2,):\n    A = 1\n") == {3}
    assert version_dead_lines("import sys\nif sys.version_info >= (x, 1):\n    A = 1\n") == set()
    assert version_dead_lines("if flag:\n    A = 1\n") == set()
    assert (
        version_dead_lines("import sys\nif sys.version_info in ((3, 11),):\n    A = 1\n") == set()
    )


def test_bodies_on_the_def_line_are_not_function_bodies() -> None:
    assert function_body_lines("def f(x: int) -> int: ...\n") == set()
    assert function_body_lines("def f(x): return (\n    x)\n") == {2}


def test_data_is_mapped_from_the_sandbox_paths_to_the_host(tmp_path: Path) -> None:
    data, rc = measured(tmp_path)
    mapped = map_data(data, tmp_path / "mapped", str(tmp_path), tmp_path / "host")
    reader = CoverageReader(mapped, rc)
    assert str(tmp_path / "host" / "m.py") in reader.data.measured_files()
