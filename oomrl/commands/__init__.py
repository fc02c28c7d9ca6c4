"""CLI command groups, one module per area; each exposes `register(app)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer

from oomrl.errors import OomrlError

T = TypeVar("T")


def run_or_exit(action: Callable[[], T]) -> T:
    """Run a command body; an oomrl error becomes its message on stderr and exit code 1."""
    try:
        return action()
    except (OomrlError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
