"""Repair inputs as the door admits them, for the tests: the ops fixture's autopsy, and loss
alerts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from oomrl.diagnostics.autopsy import AlertModule, Autopsy, PendingAlert

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ops" / "autopsy.json"


def autopsy_json(**fields: Any) -> dict[str, Any]:
    """The ops fixture's autopsy as JSON, with `fields` replaced (whole top-level fields)."""
    return {**json.loads(FIXTURE.read_text()), **fields}


def full_autopsy(**fields: Any) -> Autopsy:
    """The ops fixture's autopsy, validated, with `fields` replaced."""
    return Autopsy.model_validate(autopsy_json(**fields))


def pending_alert(
    alert_id: str, account: str = "paper", module: str = "strategies.daily_momentum"
) -> PendingAlert:
    """A loss alert with the module its repair works on (what a ledger without NAV history
    leaves)."""
    return PendingAlert(alert_id=alert_id, account=account, diagnostics=AlertModule(module=module))
