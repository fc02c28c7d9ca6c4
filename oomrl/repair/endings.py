"""The names a repair's ending goes by.

They are the flow run's state, and the line `oomrl repair` and `oomrl demo` print.
"""

from __future__ import annotations

# By the step a repair stopped at: only a promotion is plain success.
FAILED_STATE_NAMES = {
    "autopsy": "Refused",
    "claim": "Account busy",
    "superseded": "Superseded",
    "capacity": "Too many repairs",
    "test-genesis": "Tests rejected",
    "logic-genesis": "Patch rejected",
    "cross-validation": "Cross-validation failed",
}


def ending_name(status: str, step: str | None) -> str:
    """`Promoted`, `Rejected`, or the failed step's name (`Tests rejected`, `Patch rejected`,
    ...)."""
    if status in ("promoted", "rejected"):
        return status.capitalize()
    if status == "probation":
        return "On probation"
    return FAILED_STATE_NAMES.get(step or "", "Failed")
