"""CLI commands of the gate area: `oomrl gate` and `oomrl redteam`, delegating to guardrails.cli."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

LOCK_HELP = "bwrap (default when available), docker, namespace (= bwrap) or hash-only"


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""

    @app.command("gate")
    def gate(
        workspace: Annotated[Path, typer.Option(help="workspace with a \\[tool.oomrl.guard] table")],
        phase: Annotated[str, typer.Option(help="code-patch or test-gen")],
        patch: Annotated[Path, typer.Option(help="unified diff to judge")],
        expect: Annotated[str | None, typer.Option(help="red or green (test-gen)")] = None,
        holdout: Annotated[Path | None, typer.Option(help="held-out tests folder")] = None,
        lock: Annotated[str | None, typer.Option(help=LOCK_HELP)] = None,
        json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    ) -> None:
        """Judge a patch on a scratch copy of the workspace; exit 0 accepted, 1 rejected, 2 error."""
        from guardrails import cli

        args = ["gate", "--workspace", str(workspace), "--phase", phase, "--patch", str(patch)]
        args += ["--lock", lock] if lock else []
        args += ["--expect", expect] if expect else []
        args += ["--holdout", str(holdout)] if holdout else []
        args += ["--json"] if json else []
        raise typer.Exit(_run(cli, args))

    @app.command("redteam")
    def redteam(
        corpus: Annotated[Path, typer.Option(help="folder with cases.csv, patches, workspaces")],
        lock: Annotated[str | None, typer.Option(help=LOCK_HELP)] = None,
    ) -> None:
        """Run every red-team case; print attacks blocked and benign patches accepted."""
        from guardrails import cli

        args = ["redteam", "--corpus", str(corpus)] + (["--lock", lock] if lock else [])
        raise typer.Exit(_run(cli, args))


def _run(cli: object, args: list[str]) -> int:
    try:
        return int(cli.main(args))  # type: ignore[attr-defined]
    except SystemExit as exc:  # argparse rejects bad choices with exit status 2
        return int(exc.code or 0)
