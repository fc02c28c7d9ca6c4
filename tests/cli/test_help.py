"""What a new user sees first: `oomrl --help` loads nothing heavy, and every command and option of
the command tree has help in one style, with fixed choices listed and no references outside the
repo."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from orchestration.cli import app
from tests.cli.helpers import invoke

HEAVY = (
    "pandas",
    "numpy",
    "prefect",
    "sqlalchemy",
    "pydantic",
    "rich",
    "pyarrow",
    "fastapi",
    "httpx",
)
# How many characters of a command's first sentence fit the command list of `--help` untruncated.
SHORT_HELP_WIDTH = 60


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the tree with its path, groups included."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from walk(sub, (*path, name))


COMMANDS = list(walk(typer.main.get_command(app)))


def test_importing_the_cli_imports_nothing_heavy() -> None:
    code = f"import sys, orchestration.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_help_runs_without_loading_anything_heavy() -> None:
    code = (
        "import sys; sys.argv = ['oomrl', '--help']\n"
        "from orchestration.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        f"print('loaded:', sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in done.stdout and done.stdout.rstrip().endswith("loaded: []")


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "oomrl" for p, _ in COMMANDS]
)
def test_every_command_and_option_has_help_in_one_style(
    path: tuple[str, ...], command: Any
) -> None:
    help_text = (command.help or "").strip()
    assert help_text, f"{path} has no help"
    first = help_text.split("\n\n")[0].replace("\n", " ")
    assert first[0].isupper() and first.endswith("."), first
    if path:
        assert len(first.split(". ")[0]) <= SHORT_HELP_WIDTH, (
            f"'{first}' is cut in the command list"
        )
    for param in command.params:
        text = (getattr(param, "help", None) or "").strip()
        assert text, f"{' '.join(path)} {param.name} has no help"
        assert text[0].isupper() and text.endswith("."), f"{' '.join(path)} {param.name}: {text!r}"


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "oomrl" for p, _ in COMMANDS]
)
def test_help_output_has_no_noise_and_no_outside_references(
    path: tuple[str, ...], command: Any
) -> None:
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    for noise in ("<bool>", "<path>", "<float>", "<int", "DESIGN", "§"):
        assert noise not in result.output, f"{noise!r} in the help of {' '.join(path)}"
    cut = [
        line for line in result.output.splitlines() if line.endswith("...") and "Usage:" not in line
    ]
    assert not cut, f"help cut short: {cut}"
    for option in (
        p for p in command.params if isinstance(p, typer.core.TyperOption) and not p.is_flag
    ):
        assert option.metavar or option.type_descriptor.is_choice, (
            f"{' '.join(path)} {option.name} shows a type"
        )


def choices(path: tuple[str, ...], option: str) -> list[str]:
    command = dict(COMMANDS)[path]
    param = next(p for p in command.params if option in p.opts)
    return [str(choice) for choice in param.type_descriptor.choices]


def test_fixed_choices_are_enums_listed_in_help() -> None:
    from guardrails.sandbox.locks import LOCKS
    from oomrl.agent.providers import PROVIDERS
    from oomrl.market.markets import MARKETS

    for path in (("gate",), ("redteam",), ("repair",), ("demo",)):
        assert sorted(choices(path, "--lock")) == sorted(LOCKS)
    assert choices(("gate",), "--phase") == ["code-patch", "test-gen"]
    assert choices(("gate",), "--expect") == ["red", "green"]
    assert choices(("report",), "--benchmark") == ["price", "total_return"]
    assert sorted(choices(("repair",), "--provider")) == sorted(PROVIDERS)
    assert (
        sorted(choices(("ingest",), "--market"))
        == sorted(MARKETS)
        == sorted(choices(("replay",), "--market"))
    )
    assert choices(("demo",), "--repair-on") == ["friction", "critical", "warning"]
    wrong = invoke("gate", "--workspace", ".", "--phase", "patch", "--patch", "x.diff")
    assert wrong.exit_code == 2 and "'patch' is not one of 'code-patch', 'test-gen'" in wrong.output


def test_the_store_wait_default_in_help_is_the_store_default() -> None:
    from oomrl.data.lock import DEFAULT_WAIT_S

    assert f"(default: {DEFAULT_WAIT_S:.0f};" in invoke("ingest", "--help").output.replace(
        "\n", " "
    ).replace("  ", " ")
