"""The whole `oomrl` command: oomrl/'s commands (oomrl.ops.cli) with orchestration's registered
beside.

Importing it stays as cheap as oomrl.ops.cli: the commands import Prefect and the stack when they
run.
"""

from __future__ import annotations

from oomrl.ops.cli import app
from orchestration import commands

commands.register(app)

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of `oomrl` and `python -m orchestration`."""
    app()
