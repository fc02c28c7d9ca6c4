"""The layer rules of docs/architecture.md hold (import-linter), and break when a forbidden import
is added."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / ".importlinter"
PACKAGES = (
    "oomrl",
    "guardrails",
    "strategies",
    "orchestration",
    "tasks",
    "flows",
    "strategy_api",
    "strategy_host",
)

# The contracts of .importlinter, by name.
PREFECT_FREE = "oomrl/ and strategies/ never import Prefect, orchestration, tasks or flows"
JUDGE = "guardrails/ imports nothing it judges, nor Prefect"
TASKS = "tasks/ never import flows/"
ORCHESTRATION = "orchestration/ never imports flows/, tasks/ or strategies/"
NO_S = "oomrl/, orchestration/, tasks/ and flows/ never import strategies/ (S)"
STANDALONE = "strategy_api/, strategy_host/ import no oomrl, guardrails, S, Prefect"
ROOMS = (
    "guardrails/: cli > redteam > gate > judging > patch | static | sandbox > child | verdict "
    "| workspace | lazy | settings > errors"
)
CHILD = "guardrails/child/ imports nothing else of guardrails/"
LAYERS = (
    "oomrl/: ops | webhook > repair > agent > diagnostics > metrics > portfolio > data > market"
)
OPS = "oomrl/ops/: cli > commands > demo > demo_probation"
REPAIR = (
    "oomrl/repair/: loop > endings | claims | inputs | artifacts | evidence > genesis > context "
    "> promotion > probation > chain | crossval | trading > versions"
)
CONTRACTS = (
    PREFECT_FREE,
    JUDGE,
    ORCHESTRATION,
    TASKS,
    NO_S,
    STANDALONE,
    ROOMS,
    CHILD,
    LAYERS,
    OPS,
    REPAIR,
)

# Forbidden imports, each added to a module of the package that must not make it (a new module, or
# the end of an existing one where the layer is a single module), and the contract it breaks.
FORBIDDEN = {
    "oomrl/_forbidden_prefect.py": ("import prefect\n", PREFECT_FREE),
    "strategies/_forbidden_flows.py": ("import flows.chain\n", PREFECT_FREE),
    "guardrails/_forbidden_oomrl.py": ("from oomrl import settings\n", JUDGE),
    "guardrails/_forbidden_orchestration.py": ("import orchestration\n", JUDGE),
    "strategy_api/_forbidden_orchestration.py": ("import orchestration\n", STANDALONE),
    "oomrl/_forbidden_orchestration.py": ("import orchestration\n", PREFECT_FREE),
    "orchestration/_forbidden_flows.py": ("from flows import chain\n", ORCHESTRATION),
    "tasks/_forbidden_flows.py": ("from flows import chain\n", TASKS),
    "oomrl/_forbidden_strategies.py": ("from strategies import registry\n", NO_S),
    "strategy_host/_forbidden_oomrl.py": ("from oomrl import errors\n", STANDALONE),
    "guardrails/judging/_forbidden_gate.py": ("from guardrails import gate\n", ROOMS),  # a room up
    "guardrails/patch/_forbidden_static.py": (
        "from guardrails.static import sanitizer\n",
        ROOMS,
    ),  # a sibling
    "guardrails/child/_forbidden_verdict.py": ("from guardrails import verdict\n", CHILD),
    "oomrl/market/_forbidden_data.py": ("import oomrl.data.store\n", LAYERS),
    "oomrl/data/_forbidden_portfolio.py": ("import oomrl.portfolio.ledger\n", LAYERS),
    "oomrl/portfolio/_forbidden_metrics.py": ("import oomrl.metrics.performance\n", LAYERS),
    "oomrl/metrics/_forbidden_diagnostics.py": ("import oomrl.diagnostics.rules\n", LAYERS),
    "oomrl/diagnostics/_forbidden_versions.py": ("import oomrl.repair.versions\n", LAYERS),
    "oomrl/agent/_forbidden_demo.py": ("import oomrl.ops.demo\n", LAYERS),  # the ops stand above
    "oomrl/repair/_forbidden_cli.py": ("import oomrl.ops.cli\n", LAYERS),
    "oomrl/webhook/_forbidden_ops.py": ("import oomrl.ops.demo\n", LAYERS),  # a sibling
    "oomrl/ops/commands/_forbidden_cli.py": ("from oomrl.ops import cli\n", OPS),
    "oomrl/ops/demo_probation.py": ("import oomrl.ops.demo\n", OPS),
    "oomrl/repair/inputs.py": ("import oomrl.repair.loop\n", REPAIR),
    "oomrl/repair/claims.py": ("import oomrl.repair.inputs\n", REPAIR),  # a sibling
    "oomrl/repair/probation.py": ("import oomrl.repair.promotion\n", REPAIR),
    "oomrl/agent/_forbidden_probation.py": ("import oomrl.repair.probation\n", LAYERS),
    "oomrl/repair/crossval.py": ("import oomrl.repair.context\n", REPAIR),
    "oomrl/repair/context.py": ("import oomrl.repair.genesis\n", REPAIR),  # genesis stands above
    "oomrl/repair/chain.py": ("import oomrl.repair.trading\n", REPAIR),  # a sibling
    "oomrl/repair/versions.py": ("import oomrl.repair.promotion\n", REPAIR),  # versions call none
}


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the packages found first on sys.path from `root` (its cwd)."""
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        f"sys.exit(lint_imports(config_filename={str(CONFIG)!r}, no_cache=True))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def copy_packages(dest: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def test_the_repository_keeps_every_layer_contract() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    report = " ".join(result.stdout.split())  # import-linter wraps long names
    for contract in CONTRACTS:
        assert f"{contract} KEPT" in report


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, module: str) -> None:
    copy_packages(tmp_path)
    code, contract = FORBIDDEN[module]
    planted = tmp_path / module
    planted.write_text((planted.read_text() if planted.exists() else "") + code)
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"{contract} BROKEN" in " ".join(result.stdout.split()), result.stdout[-4000:]
    offender = module.removesuffix(".py").replace("/", ".")
    assert offender in result.stdout, result.stdout[-4000:]
