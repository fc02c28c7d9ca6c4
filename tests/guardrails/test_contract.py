"""The workspace contract and the gate's command lines (exit codes, JSON, lock choice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardrails import cli
from guardrails.errors import GateSetupError
from guardrails.workspace import load_contract
from tests.guardrails.gate_helpers import diff_for, make_workspace

CONTRACT_ERRORS = [
    ("", "has no \\[tool.oomrl.guard\\]"),
    ("[tool.oomrl.guard]\nsource = []\ntests = ['tests']\n", "non-empty list"),
    ("[tool.oomrl.guard]\nsource = ['/abs']\ntests = ['tests']\n", "inside the workspace"),
    ("[tool.oomrl.guard]\nsource = ['../up']\ntests = ['tests']\n", "inside the workspace"),
    ("[tool.oomrl.guard]\nsource = ['missing']\ntests = ['tests']\n", "is not a folder"),
    ("[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\ncoverage_min = 101\n", "coverage_min"),
    (
        "[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\ncoverage_min = true\n",
        "coverage_min",
    ),
    ("[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\nallow = 'all'\n", "allow"),
    ("[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\nholdout = 3\n", "holdout"),
    (
        "[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\nholdout = 'nowhere'\n",
        "does not exist",
    ),
    ("[tool.oomrl.guard\n", "not valid TOML"),
    (
        "[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\nallow_imports = ['os path']\n",
        "allow_imports",
    ),
    ("[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\nbehaviour = 1\n", "must be a table"),
    (
        (
            "[tool.oomrl.guard]\nsource = ['s']\ntests = ['tests']\n[tool.oomrl.guard.behaviour]\n"
            "convention = 'magic'\nentry = 'x'\nproperties = ['fast']\ninputs = "
            "'../x.json'\nmore = 1\n"
        ),
        "unknown keys.*convention must be.*entry must name.*properties must.*inputs must",
    ),
]


@pytest.mark.parametrize(("pyproject", "message"), CONTRACT_ERRORS)
def test_contract_errors_name_the_problem(tmp_path: Path, pyproject: str, message: str) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "pyproject.toml").write_text(pyproject)
    with pytest.raises(GateSetupError, match=message):
        load_contract(tmp_path)


def test_contract_defaults_and_phase_scopes(tmp_path: Path) -> None:
    with pytest.raises(GateSetupError, match="is missing"):
        load_contract(tmp_path)
    with pytest.raises(GateSetupError, match="not a directory"):
        load_contract(tmp_path / "nothing")
    (tmp_path / "src").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.oomrl.guard]\nsource = ['src/']\ntests = ['tests']\nallow = ['sanitizer.exec']\n"
    )
    contract = load_contract(tmp_path)
    assert contract.source == ("src",) and contract.coverage_min == 95.0
    assert contract.allow == frozenset({"sanitizer.exec"}) and contract.holdout is None
    assert contract.writable("code-patch") == ["src"] and contract.locked("code-patch") == ["tests"]
    assert contract.writable("test-gen") == ["tests"] and contract.locked("test-gen") == ["src"]
    assert contract.allow_imports == frozenset() and contract.behaviour is None


def test_behaviour_contract_defaults(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.oomrl.guard]\nsource = ['s']\ntests = ['t']\nallow_imports = ['scipy.stats']\n"
        "[tool.oomrl.guard.behaviour]\nentry = 's.registry:get'\nconvention = 'strategy'\n"
    )
    contract = load_contract(tmp_path)
    assert contract.allow_imports == frozenset({"scipy.stats"})
    assert contract.behaviour is not None and contract.behaviour.entry == "s.registry:get"
    assert contract.behaviour.view == "strategies.base:MarketView"
    assert contract.behaviour.inputs == "behaviour.json" and contract.behaviour.properties == ()


def test_repository_contract_is_valid() -> None:
    contract = load_contract(Path(__file__).resolve().parents[2])
    assert contract.source == ("strategies",) and contract.tests == ("tests/strategies",)


def test_cli_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = make_workspace(tmp_path)
    patch = tmp_path / "p.diff"
    patch.write_text(diff_for(ws, {"tests/test_smoke.py": "def test_x():\n    pass\n"}))
    args = [
        "gate",
        "--workspace",
        str(ws),
        "--phase",
        "code-patch",
        "--patch",
        str(patch),
        "--lock",
        "hash-only",
    ]
    assert cli.main([*args, "--json"]) == cli.EXIT_REJECTED
    payload = json.loads(capsys.readouterr().out)
    assert payload["accepted"] is False and payload["violations"][0]["rule"] == "diff.locked_path"
    assert cli.main(args) == cli.EXIT_REJECTED
    assert "REJECTED (code-patch, lock hash-only" in capsys.readouterr().out
    assert cli.main([*args[:-2]]) == cli.EXIT_REJECTED  # the default sandbox
    capsys.readouterr()
    assert cli.main([*args[:-2], "--lock", "docker"]) == cli.EXIT_SETUP
    assert "no reachable Docker engine" in capsys.readouterr().err
    missing = [
        "gate",
        "--workspace",
        str(ws),
        "--phase",
        "code-patch",
        "--patch",
        str(tmp_path / "none.diff"),
    ]
    assert cli.main(missing) == cli.EXIT_SETUP
    assert "cannot read patch" in capsys.readouterr().err


def test_oomrl_cli_delegates_to_the_gate(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from oomrl.ops.cli import app

    ws = make_workspace(tmp_path)
    patch = tmp_path / "p.diff"
    patch.write_text(diff_for(ws, {"tests/test_smoke.py": "def test_x():\n    pass\n"}))
    result = CliRunner().invoke(
        app,
        [
            "gate",
            "--workspace",
            str(ws),
            "--phase",
            "code-patch",
            "--patch",
            str(patch),
            "--lock",
            "hash-only",
            "--json",
        ],
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["violations"][0]["rule"] == "diff.locked_path"
    result = CliRunner().invoke(
        app,
        [
            "gate",
            "--workspace",
            str(tmp_path / "nope"),
            "--phase",
            "code-patch",
            "--patch",
            str(patch),
        ],
    )
    assert result.exit_code == 2


def test_oomrl_gate_passes_the_superseded_tests_to_a_red_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from oomrl.ops.cli import app

    ws = make_workspace(tmp_path, "buggy")
    old = (ws / "tests" / "test_smoke.py").read_text()
    patch = tmp_path / "p.diff"
    patch.write_text(
        diff_for(
            ws,
            {
                "tests/test_smoke.py": old.replace(
                    '{"ONLY": 1.0}, top_k=1) == {"ONLY": 1.0}',
                    '{"ONLY": 1.0, "B": 0.0}, top_k=1) == {"ONLY": 1.0, "B": 0.0}',
                )
            },
        )
    )
    node_id = "tests/test_smoke.py::test_single_asset_gets_full_weight"
    args = [
        "gate",
        "--workspace",
        str(ws),
        "--phase",
        "test-gen",
        "--patch",
        str(patch),
        "--lock",
        "hash-only",
    ]
    named = CliRunner().invoke(app, [*args, "--expect", "red", "--supersedes", node_id])
    assert named.exit_code == 0, named.output
    assert f"superseded old test (judged as a red test): {node_id}" in named.output
    unnamed = CliRunner().invoke(app, [*args, "--expect", "red", "--json"])
    assert (
        unnamed.exit_code == 1
        and json.loads(unnamed.stdout)["violations"][0]["rule"] == "tests.weakened"
    )
    green = CliRunner().invoke(app, [*args, "--expect", "green", "--supersedes", node_id])
    assert green.exit_code == 2 and "only valid with --phase test-gen --expect red" in green.output
