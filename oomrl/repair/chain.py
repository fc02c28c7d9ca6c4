"""The daily chain's domain steps: which session it is about, and marking every active account."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from oomrl.errors import OomrlError
from oomrl.portfolio.marking import MarkOutcome, active_accounts, last_stored_session, run_marking
from oomrl.settings import OomrlSettings

MIN_REPORT_SESSIONS = 3  # the report regresses on the CSI 300: it needs more than two returns


def stored_as_of(settings: OomrlSettings) -> date:
    """The last session with bars in the market store.

    When the store is empty, the bundled sample's.
    """
    from oomrl.data.sample import ensure_sample

    return last_stored_session(ensure_sample(settings))


@dataclass
class Marking:
    """What marking every active account on one session did."""

    as_of: date
    outcomes: list[MarkOutcome]
    errors: dict[str, str] = field(default_factory=dict)  # account -> why it could not be marked

    @property
    def marked(self) -> list[MarkOutcome]:
        """The accounts that got at least one new NAV row."""
        return [o for o in self.outcomes if o.marked]

    @property
    def halted(self) -> list[MarkOutcome]:
        """The accounts the kill switch halted on one of the newly marked sessions."""
        return [o for o in self.outcomes if o.halted]

    def summary(self) -> dict[str, Any]:
        """The marking as JSON (the chain's result and artifact)."""
        return {
            "as_of": str(self.as_of),
            "accounts": [o.summary() for o in self.outcomes],
            "marked": [o.account for o in self.marked],
            "halted": [o.summary() for o in self.halted],
            "errors": self.errors,
            "nothing_new": self.nothing_new(),
        }

    def nothing_new(self) -> str | None:
        """Why there is nothing to do after marking, or None when some account has a new session."""
        if self.marked or self.errors:
            return None
        if not self.outcomes:
            return (
                f"no active account to mark on {self.as_of} (a first rebalance opens one); "
                "nothing traded, nothing failed"
            )
        return (
            f"no new session: every active account is marked through {self.as_of}; "
            "nothing traded, nothing failed"
        )


def mark_active_accounts(settings: OomrlSettings, as_of: date) -> Marking:
    """Mark every active account at the close of each session up to `as_of`.

    Only sessions it has no NAV for are marked.
    """
    from oomrl.portfolio.service import open_ledger

    marking = Marking(as_of, [])
    for name in active_accounts(open_ledger(settings)):
        try:
            marking.outcomes.append(run_marking(settings, name, as_of))
        except OomrlError as exc:  # bad data of one account must not leave the others unmarked
            if exc.transient:
                raise
            marking.errors[name] = str(exc)
    return marking


def report_gap(nav_rows: int) -> str | None:
    """Why an account's report cannot be written yet, or None when it can."""
    if nav_rows >= MIN_REPORT_SESSIONS:
        return None
    return (
        f"{nav_rows} session(s) of NAV in the ledger; a report needs {MIN_REPORT_SESSIONS} "
        "(it will be written after the next marked session)"
    )
