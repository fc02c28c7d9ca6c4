"""The absorbing state: once principal loss reaches tau the account is HALTED until a person resumes
it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from oomrl.errors import AccountHaltedError

DEFAULT_THRESHOLD = 0.20
logger = logging.getLogger(__name__)


class AccountStatus(StrEnum):
    """Trading status of an account."""

    ACTIVE = "active"
    HALTED = "halted"
    CLOSED = "closed"  # a shadow book whose probation was decided: never trades nor is marked again


@dataclass(frozen=True)
class KillSwitch:
    """Trips when L_t = 1 - W_t / W_0 >= threshold; never un-trips by itself."""

    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"kill-switch threshold must be in (0, 1], got {self.threshold}")

    def trips(self, loss: float) -> bool:
        """True when a principal loss reaches the threshold."""
        return loss >= self.threshold

    def next_status(self, status: AccountStatus, loss: float) -> AccountStatus:
        """HALTED is absorbing: a halted account stays halted whatever the loss does."""
        if status is AccountStatus.HALTED or self.trips(loss):
            if status is not AccountStatus.HALTED:
                logger.warning(
                    "kill switch tripped: principal loss %.2f%% reached the threshold %.0f%%; "
                    "the account is HALTED",
                    loss * 100,
                    self.threshold * 100,
                )
            return AccountStatus.HALTED
        return AccountStatus.ACTIVE

    def reason(self, loss: float) -> str:
        """The message recorded with a halt."""
        return (
            f"principal loss {loss:.2%} reached the kill-switch threshold {self.threshold:.0%}; "
            "trading stays halted until `oomrl account resume --confirm`"
        )


def require_active(account: str, status: AccountStatus, reason: str | None = None) -> None:
    """Raise AccountHaltedError when the account is halted: the kill switch always wins."""
    if status is AccountStatus.HALTED:
        detail = f" ({reason})" if reason else ""
        raise AccountHaltedError(
            f"account {account!r} is HALTED{detail}; resume it with `oomrl account resume "
            f"--account {account} --confirm`"
        )
