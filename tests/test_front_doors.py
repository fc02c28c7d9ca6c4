"""Every package of oomrl/ and guardrails/ states its public names (`__all__`), each name resolves,
and opening a package loads no pandas: the command line stays light."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = sorted(
    ".".join(init.parent.relative_to(REPO).parts)
    for root in ("oomrl", "guardrails")
    for init in (REPO / root).rglob("__init__.py")
    if init.parent != REPO / root and "__pycache__" not in init.parts
)
HEAVY = ("pandas", "numpy", "pyarrow", "sqlalchemy", "matplotlib")


def test_the_packages_are_found() -> None:
    assert {"oomrl.agent", "oomrl.data.sources", "oomrl.portfolio", "guardrails.sandbox"} <= set(
        PACKAGES
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_states_its_public_names_and_each_resolves(package: str) -> None:
    module = importlib.import_module(package)
    public = module.__dict__.get("__all__")
    assert isinstance(public, list) and public, f"{package} states no __all__"
    assert len(set(public)) == len(public), f"{package}.__all__ repeats a name"
    for name in public:  # as `from package import name` finds it: an attribute, else a submodule
        found = getattr(module, name, None)
        if found is None:
            found = importlib.import_module(f"{package}.{name}")
        assert found is not None, f"{package}.{name}"


@pytest.mark.slow
def test_opening_a_package_loads_nothing_heavy() -> None:
    # One fresh interpreter opens the packages one by one and notes the first that loads a heavy
    # library: a front door that imported its modules up front would pull pandas into `--help`.
    code = (
        "import importlib, json, sys\n"
        f"heavy = {HEAVY!r}\n"
        "found = {}\n"
        f"for package in {PACKAGES!r}:\n"
        "    importlib.import_module(package)\n"
        "    loaded = [name for name in heavy if name in sys.modules]\n"
        "    if loaded:\n"
        "        found[package] = loaded\n"
        "        break\n"
        "print(json.dumps(found))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(result.stdout) == {}
