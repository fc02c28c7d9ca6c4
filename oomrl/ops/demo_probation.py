"""The demo's probations, one simulated session at a time, as the daily chain runs them.

After a repair ends "On probation", every session runs three steps.
- The open shadow books trade on their challenger's schedule (`advance_shadows`).
- Every book of the account is marked: the shadow and the champion. The demo's own loop books the
  champion only on the sessions its version rebalances.
- The ripe probations are decided (`decide_due`).
The decision is printed and kept for `demo.json`. After a promotion the account is marked until the
new version first trades. So the sessions the old version's book was held count as its own. Table 1
and the phases follow the capital.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from rich.console import Console

from oomrl.settings import OomrlSettings

if TYPE_CHECKING:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.portfolio.market import MarketFrames
    from oomrl.repair.probation import Decided, Probation


@dataclass
class ProbationSessions:
    """The open probations of one account in the demo's replay."""

    settings: OomrlSettings
    account: str
    store: Any
    market: MarketFrames  # the demo's market, built once: marking reuses it
    console: Console
    decided: list[Decided] = field(default_factory=list)
    unmoved: bool = False  # promoted, and the new version has not traded the account yet

    @property
    def ledger(self) -> Ledger:
        from oomrl.portfolio.service import open_ledger

        return open_ledger(self.settings)

    def running(self) -> list[Probation]:
        from oomrl.repair.probation import open_probations

        return open_probations(self.ledger, self.account)

    def session(self, day: date) -> tuple[list[Decided], date | None]:
        """Trade, mark and judge the open probations on `day`.

        Returns the ones decided, and the session the champion's kill switch halted it on. The
        session is set only if a mark tripped it.
        """
        from oomrl.repair.probation import advance_shadows, decide_due

        running = self.running()
        if not running:
            return [], self.hold(day)
        advance_shadows(self.settings, day, self.store)
        for probation in running:
            self.mark(probation.shadow, day)
        halted = self.mark(self.account, day)
        decided, _ = decide_due(self.settings, day, self.store)
        mine = [d for d in decided if d.probation.account == self.account]
        for done in mine:
            self.say(done)
        self.decided += mine
        self.unmoved = any(d.probation.status == "promoted" for d in mine)
        return mine, halted

    def hold(self, day: date) -> date | None:
        """After a promotion, mark the account in the old version's name.

        That lasts until the new one trades it.
        """
        from oomrl.portfolio.marking import holding_version

        if self.unmoved and holding_version(
            self.ledger, self.account
        ) == self.ledger.active_version(self.account):
            self.unmoved = False
        return self.mark(self.account, day) if self.unmoved else None

    def mark(self, account: str, day: date) -> date | None:
        """Mark `account` through `day` on the demo's market; the session its kill switch tripped
        on."""
        from oomrl.portfolio.marking import mark_account
        from oomrl.portfolio.setup import market_rules

        s = self.settings
        outcome = mark_account(
            self.ledger,
            account,
            day,
            self.market,
            market_rules(s),
            s.ledger.kill_threshold,
            s.market.reward_lambda,
            s.market.reward_gamma,
            s.market.reward_terminal_penalty,
        )
        return outcome.halted_on if outcome.halted else None

    def say(self, done: Decided) -> None:
        """One line per decision, like the repair lines: the verdict, the forward sessions, the
        why."""
        p, found = done.probation, done.evidence
        by = {row.version: row for row in found.rows}
        figures = ", ".join(
            f"{label} {by[label].net_return:+.2%}"
            for label in ("challenger", "champion")
            if label in by
        )
        style = "green" if p.status == "promoted" else "red"
        then = (
            "the account trades it from its next rebalance"
            if p.status == "promoted"
            else "the champion keeps the capital; the forward autopsy is the account's alert"
        )
        self.console.print(
            f"[{style}]probation {p.status}[/] {p.tag} on {p.decided_on} after "
            f"{found.sessions_done} forward sessions {found.start}..{found.end} (net of friction: "
            f"{figures}): {p.reason} — {then}"
        )


def probation_log(settings: OomrlSettings, account: str) -> list[Probation]:
    """Every probation of `account` for `demo.json`, as the ledger holds it (the evidence table
    included)."""
    from oomrl.portfolio.service import open_ledger
    from oomrl.repair.probation import probations

    return probations(open_ledger(settings), account)
