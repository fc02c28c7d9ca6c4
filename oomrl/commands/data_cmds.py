"""CLI commands for the data area (filled in by the issue that owns it)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
