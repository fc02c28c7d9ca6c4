"""The oomrl source checkout: the folder that holds the bundled strategies/, tests/ and docs/."""

from __future__ import annotations

from pathlib import Path


def repo_root() -> Path:
    """The oomrl source checkout holding the bundled strategies/ and tests/strategies/."""
    return Path(__file__).resolve().parent.parent
