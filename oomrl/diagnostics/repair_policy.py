"""Which loss alerts ask for a repair: the strategy version still active, no recent request for it.

The severity floor is the repair trigger's (`oomrl.alert.severity` in prefect.yaml). This module
decides the rest and says so in the event's labels. So the trigger's match reads as the whole
policy.

- An alert asks for nothing when the account no longer trades its strategy version
  (`inactive-version`).
- While a challenger of the account is on probation, an alert asks for nothing (`probation`). The
  forward market is judging the repair already made.
- Within `cooldown` sessions of a request for the same account and version, some alerts ask for
  nothing (`cooldown`). Those are alerts of the same or a lower severity: one cause, one repair. A
  critical alert is never held back by a warning's request. The trigger may be set to ignore
  warnings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.events import account_resource
from oomrl.market import calendar

SEVERITY_RANK = {"warning": 1, "critical": 2}
REPAIR_REQUEST = "repair-request"  # account_events.kind (16 characters at most)
SEVERITY_LABEL = "oomrl.alert.severity"
REPAIR_LABEL = "oomrl.repair"
Verdict = Literal["requested", "cooldown", "inactive-version", "probation"]


class RequestLedger(Protocol):
    """The part of the ledger the policy reads and writes."""

    def active_version(self, account: str) -> str | None: ...

    def events(self, account: str) -> list[dict[str, Any]]: ...

    def record_event(self, account: str, kind: str, as_of: date | None, detail: str) -> None: ...

    def probations(self, account: str | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class RepairDecision:
    """Whether an alert asks the `repair` deployment for a run, and why (or why not)."""

    verdict: Verdict
    reason: str

    @property
    def requested(self) -> bool:
        return self.verdict == "requested"


class JudgedAutopsy(BaseModel):
    """A new alert's autopsy with the repair policy's verdict on it: what loss diagnostics
    return."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    autopsy: Autopsy
    decision: RepairDecision

    def summary(self) -> dict[str, Any]:
        """The alert in one JSON row (the chain's artifact, the diagnosis table)."""
        a = self.autopsy
        return {
            "alert_id": a.alert_id,
            "as_of": a.as_of.isoformat(),
            "rule": a.trigger.rule,
            "severity": a.severity,
            "repair": self.decision.verdict,
        }


def sessions_between(earlier: date, later: date) -> int:
    """XSHG sessions after `earlier` up to `later` (0 on the same day; symmetric)."""
    lo, hi = sorted((earlier, later))
    return max(len(calendar.sessions(lo, hi)) - 1, 0)


def judge(ledger: RequestLedger, autopsy: Autopsy, cooldown: int) -> RepairDecision:
    """The decision for one new alert of the account.

    Alerts are judged in the order they are raised.
    """
    account, version = autopsy.account, autopsy.diagnostics.strategy_version
    active = ledger.active_version(account)
    if version and active and version != active:
        return RepairDecision(
            "inactive-version",
            f"the alert is about version {version[:12]}, but {account} now trades {active[:12]}",
        )
    running = [p for p in ledger.probations(account) if p["status"] == "open"]
    if running:
        return RepairDecision(
            "probation",
            f"{running[0]['tag']} is on probation on {account} since "
            f"{running[0]['opened_on']}: its forward sessions decide first",
        )
    rank = SEVERITY_RANK[autopsy.severity]
    for event in reversed(ledger.events(account)):
        if event["kind"] != REPAIR_REQUEST:
            continue
        earlier = json.loads(event["detail"])
        if (
            earlier.get("version") != version
            or SEVERITY_RANK.get(earlier.get("severity"), 0) < rank
        ):
            continue
        gap = sessions_between(event["as_of"], autopsy.as_of)
        if gap < cooldown:
            return RepairDecision(
                "cooldown",
                f"alert {earlier['alert_id']} asked for a repair of this "
                f"version {gap} session(s) before (cooldown {cooldown})",
            )
    return RepairDecision(
        "requested", f"{autopsy.severity} alert on {autopsy.as_of} about the active version"
    )


def record(ledger: RequestLedger, autopsy: Autopsy) -> None:
    """Remember that this alert asked for a repair.

    The cooldown of the next ones starts here.
    """
    detail = {
        "alert_id": autopsy.alert_id,
        "version": autopsy.diagnostics.strategy_version,
        "severity": autopsy.severity,
    }
    ledger.record_event(
        autopsy.account, REPAIR_REQUEST, autopsy.as_of, json.dumps(detail, sort_keys=True)
    )


def alert_resource(account: str, severity: str, verdict: Verdict) -> dict[str, str]:
    """The Prefect resource of an `oomrl.loss.alert` event: the account.

    Its labels are what the repair trigger matches on. They are its severity floor and this
    policy's verdict.
    """
    return {**account_resource(account), SEVERITY_LABEL: severity, REPAIR_LABEL: verdict}
