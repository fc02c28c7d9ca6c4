"""No module reads the environment outside the two settings packages (oomrl/settings/,
guardrails/settings.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("oomrl", "guardrails", "orchestration", "tasks", "flows")
ALLOWED = ("oomrl/settings/", "guardrails/settings.py")  # the two settings packages
ENVIRONMENT_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})


def environment_reads(source: str) -> list[int]:
    """Lines of `source` that touch the process environment: `os.environ`, `os.getenv`, `from os
    import environ`."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if _reads_environment(node)]


def _reads_environment(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return (
            node.attr in ENVIRONMENT_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in ("os", "posix", "nt")
        )
    if isinstance(node, ast.ImportFrom):
        return node.module in ("os", "posix", "nt") and any(
            alias.name in ENVIRONMENT_NAMES for alias in node.names
        )
    return False


def _allowed(relative: str) -> bool:
    return any(
        relative.startswith(allowed) if allowed.endswith("/") else relative == allowed
        for allowed in ALLOWED
    )


def offenders(repo: Path) -> list[str]:
    """`path:line` of every environment read under the scanned folders of `repo`, settings packages
    aside."""
    found = []
    for root in SCANNED:
        for path in sorted((repo / root).rglob("*.py")):
            relative = path.relative_to(repo).as_posix()
            if not _allowed(relative):
                found += [
                    f"{relative}:{line}"
                    for line in environment_reads(path.read_text(encoding="utf-8"))
                ]
    return found


@pytest.mark.parametrize(
    "planted",
    [
        "import os\nvalue = os.environ.get('OOMRL_X')\n",
        "import os\nvalue = os.environ['OOMRL_X']\n",
        "import os\nvalue = os.getenv('OOMRL_X')\n",
        "import os\nvalue = os.environb[b'OOMRL_X']\n",
        "from os import environ\nvalue = environ['OOMRL_X']\n",
        "from os import getenv as read\n",
    ],
)
def test_a_planted_environment_read_is_found(planted: str) -> None:
    assert environment_reads(planted)


def test_what_is_not_the_environment_passes() -> None:
    assert not environment_reads(
        "import os\nnull = os.devnull\nhere = os.getcwd()\nenv = {'environ': 1}\n"
    )


def test_no_module_reads_the_environment_outside_the_settings() -> None:
    found = offenders(REPO)
    assert not found, f"read settings through oomrl.settings (or guardrails.settings): {found}"


def test_a_planted_module_is_an_offender_and_the_settings_are_not(tmp_path: Path) -> None:
    reads = "import os\nvalue = os.environ.get('OOMRL_X')\n"
    for relative in (
        "oomrl/planted.py",
        "tasks/deep/planted.py",
        "oomrl/settings/root.py",
        "guardrails/settings.py",
        "strategies/elsewhere.py",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(reads)
    assert offenders(tmp_path) == ["oomrl/planted.py:2", "tasks/deep/planted.py:2"]
    assert not _allowed("orchestration/stack.py") and not _allowed("guardrails/locks.py")
    assert not _allowed("oomrl/settings_extra.py")
    assert all((REPO / allowed).exists() for allowed in ALLOWED)
