"""The layer rules of docs/architecture.md hold (import-linter), and break when a forbidden import is added."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / ".importlinter"
PACKAGES = ("oomrl", "guardrails", "strategies", "tasks", "flows", "strategy_api", "strategy_host")

# One forbidden import per contract, each in a new module of the package that must not make it.
FORBIDDEN = {
    "oomrl/_forbidden_prefect.py": "import prefect\n",
    "strategies/_forbidden_flows.py": "import flows.chain\n",
    "guardrails/_forbidden_oomrl.py": "from oomrl import settings\n",
    "tasks/_forbidden_flows.py": "from flows import chain\n",
    "oomrl/_forbidden_strategies.py": "from strategies import registry\n",
    "strategy_host/_forbidden_oomrl.py": "from oomrl import errors\n",
}
CONTRACTS = (
    "oomrl/ and strategies/ never import Prefect, tasks or flows",
    "guardrails/ imports nothing it judges, nor Prefect",
    "tasks/ never import flows/",
    "oomrl/, tasks/ and flows/ never import strategies/ (S)",
    "strategy_api/, strategy_host/ import no oomrl, guardrails, S, Prefect",
)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the packages found first on sys.path from `root` (its cwd)."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(CONFIG)!r}, no_cache=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          timeout=300, check=False)


def copy_packages(dest: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(REPO / package, dest / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def test_the_repository_keeps_every_layer_contract() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    for contract in CONTRACTS:
        assert f"{contract} KEPT" in result.stdout


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, module: str) -> None:
    copy_packages(tmp_path)
    (tmp_path / module).write_text(FORBIDDEN[module])
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    assert "BROKEN" in result.stdout
    offender = module.removesuffix(".py").replace("/", ".")
    assert offender in result.stdout, result.stdout[-4000:]
