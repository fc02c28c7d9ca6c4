"""Autopsies as repair input: validation, and completion of partial (external) alerts from the ledger."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from oomrl.errors import OomrlError


def load_autopsy(data: Any) -> dict[str, Any]:
    """A validated autopsy as JSON data: the full Autopsy model, or at least an account and a module."""
    from pydantic import ValidationError

    from oomrl.diagnostics.autopsy import Autopsy

    if not isinstance(data, dict):
        raise OomrlError(f"an autopsy must be a JSON object, got {type(data).__name__}")
    try:
        return Autopsy.model_validate(data).model_dump(mode="json")
    except ValidationError as exc:
        module = (data.get("diagnostics") or {}).get("module") if isinstance(
            data.get("diagnostics"), dict) else None
        if data.get("account") and isinstance(module, str) and module.startswith("strategies."):
            return data  # a partial autopsy (e.g. from an external alert): enough to repair
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise OomrlError(f"invalid autopsy: {problems}") from exc


def complete_autopsy(autopsy: dict[str, Any], ledger: Any) -> dict[str, Any]:
    """A partial autopsy (an external alert) completed by the diagnostics critic from the ledger.

    Full autopsies, and accounts without NAV history up to the alert date, are returned as they are."""
    from oomrl.diagnostics.critic import autopsy_for
    from oomrl.diagnostics.rules import Alert, AlertConfig

    if autopsy.get("event") or not autopsy.get("as_of"):
        return autopsy
    account = str(autopsy["account"])
    diagnostics = autopsy.get("diagnostics") or {}
    severity = autopsy.get("severity") if autopsy.get("severity") in ("warning", "critical") else "warning"
    alert = Alert(alert_id=str(autopsy.get("alert_id") or f"external-{uuid.uuid4().hex[:12]}"),
                  account=account, rule=str(autopsy.get("rule") or "external"), severity=severity,
                  as_of=as_of_of(autopsy), window_start=as_of_of(autopsy), value=0.0, threshold=0.0,
                  message=str(diagnostics.get("root_cause") or "external loss alert"))
    try:
        full = autopsy_for(alert, ledger.nav_frame(account), ledger.fills_frame(account), AlertConfig(),
                           module=diagnostics["module"], fallback_version=ledger.active_version(account))
    except OomrlError:
        return autopsy  # no usable history: the critic works from what the alert says
    data = full.model_dump(mode="json")
    if autopsy.get("mandate"):
        data["mandate"] = autopsy["mandate"]
    return data


def as_of_of(autopsy: dict[str, Any]) -> date | None:
    """The autopsy's as-of date, when it has one."""
    value = autopsy.get("as_of")
    return date.fromisoformat(str(value)) if value else None
