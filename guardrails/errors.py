"""The gate's errors: what stops a judgement (exit 2) and what makes a patch unreadable."""

from __future__ import annotations


class GateSetupError(Exception):
    """A usage or infrastructure problem (exit 2): the gate could not judge at all."""


class PatchError(ValueError):
    """The patch text is not a well-formed unified diff (the message names the line)."""
