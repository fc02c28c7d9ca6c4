"""CLI commands of the gate area: `oomrl gate` (delegating to guardrails.cli) and `oomrl
redteam`."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from oomrl.ops.commands import Lock, progress

LOCK_HELP = (
    "Sandbox of the test runs (default: the strongest available, bwrap; hash-only only when named)."
)


class Phase(enum.StrEnum):
    """What the patch may change: source (tests locked) or tests (source locked)."""

    code_patch = "code-patch"
    test_gen = "test-gen"


class Expect(enum.StrEnum):
    """What new tests must do on the unchanged source."""

    red = "red"
    green = "green"


def gate(
    workspace: Annotated[
        Path, typer.Option(metavar="DIR", help="Workspace with a [tool.oomrl.guard] table.")
    ],
    phase: Annotated[
        Phase, typer.Option(help="What the patch changes: code-patch (source) or test-gen (tests).")
    ],
    patch: Annotated[Path, typer.Option(metavar="FILE", help="Unified diff to judge.")],
    expect: Annotated[
        Expect | None,
        typer.Option(
            help="With test-gen: the new tests fail (red) or pass (green) on the unchanged source."
        ),
    ] = None,
    holdout: Annotated[
        Path | None, typer.Option(metavar="DIR", help="Held-out tests run after the patch.")
    ] = None,
    lock: Annotated[Lock | None, typer.Option(help=LOCK_HELP)] = None,
    supersedes: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NODEID",
            help="With --expect red: an old test the approved mandate makes obsolete "
            "(tests/t.py::test_x; repeat for each), judged as a red test when "
            "changed; every other old test keeps the weakening rule.",
        ),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="Print the verdict as one JSON object.")
    ] = False,
) -> None:
    """Judge a patch on a scratch copy of a workspace. Exit 0 accepted, 1 rejected, 2 error."""
    from guardrails import cli

    args = ["gate", "--workspace", str(workspace), "--phase", phase.value, "--patch", str(patch)]
    args += ["--lock", lock.value] if lock else []
    args += ["--expect", expect.value] if expect else []
    args += ["--holdout", str(holdout)] if holdout else []
    args += [f"--supersedes={node_id}" for node_id in supersedes or []]
    args += ["--json"] if json else []
    raise typer.Exit(_run(cli, args))


def redteam(
    corpus: Annotated[
        Path, typer.Option(metavar="DIR", help="Folder with cases.csv, patches and workspaces.")
    ],
    lock: Annotated[Lock | None, typer.Option(help=LOCK_HELP)] = None,
) -> None:
    """Run every red-team case. Prints attacks blocked and benign patches accepted."""
    from guardrails.cli import EXIT_ACCEPTED, EXIT_REJECTED, EXIT_SETUP
    from guardrails.errors import GateSetupError
    from guardrails.redteam import format_report, run_corpus

    try:
        with progress("redteam") as advance:
            report = run_corpus(corpus, lock=lock.value if lock else None, progress=advance)
    except GateSetupError as exc:  # exit 2, as the gate's contract says for set-up errors
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_SETUP) from None
    typer.echo(format_report(report))
    raise typer.Exit(EXIT_ACCEPTED if report.all_as_expected else EXIT_REJECTED)


def _run(cli: object, args: list[str]) -> int:
    try:
        return int(cli.main(args))  # type: ignore[attr-defined]
    except SystemExit as exc:  # argparse rejects bad choices with exit status 2
        return int(exc.code or 0)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("gate")(gate)
    app.command("redteam")(redteam)
