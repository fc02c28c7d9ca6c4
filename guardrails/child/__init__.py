"""Code that runs inside the jail: `childrun` imports nothing of the gate and is copied in alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the launcher imports pytest and coverage: only its runner loads it
    from guardrails.child import childrun

__all__ = ["childrun"]
