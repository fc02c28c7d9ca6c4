"""The process environment as a whole: the one door through which oomrl passes it down to
children."""

from __future__ import annotations

import os


def environment() -> dict[str, str]:
    """A copy of this process's environment (for a child, or for code that parses named
    variables)."""
    return dict(os.environ)


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment with `extra` set: what a child process is given."""
    return {**os.environ, **extra}
