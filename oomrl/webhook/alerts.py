"""What a loss-alert body must contain, and how Prometheus Alertmanager notifications map onto it."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ALERT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,199}$"


class InvalidAlertError(ValueError):
    """The body is not a loss alert; the message says which field is wrong."""


class LossAlertBody(BaseModel):
    """The minimum the webhook needs: an alert id; the rest of the autopsy (DESIGN §4.4) is passed on."""

    model_config = ConfigDict(extra="allow")

    alert_id: str = Field(pattern=ALERT_ID_PATTERN)
    account: str | None = Field(default=None, min_length=1, max_length=200)


def _describe(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"
                     for err in exc.errors())


def _validate_full_autopsy(body: dict[str, Any]) -> None:
    """A body that says it is a full autopsy (has `event`) must match the Autopsy model (DESIGN §4.4)."""
    from oomrl.diagnostics.autopsy import Autopsy

    try:
        Autopsy.model_validate(body)
    except ValidationError as exc:
        raise InvalidAlertError(f"not a valid autopsy: {_describe(exc)}") from exc


def parse_loss_alert(raw: bytes) -> dict[str, Any]:
    """The alert as a dict, or InvalidAlertError naming the problem."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidAlertError(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidAlertError(f"body must be a JSON object, got {type(body).__name__}")
    try:
        LossAlertBody.model_validate(body)
    except ValidationError as exc:
        raise InvalidAlertError(_describe(exc)) from exc
    if "event" in body:
        _validate_full_autopsy(body)
    return body


class AlertmanagerAlert(BaseModel):
    """One alert of an Alertmanager webhook notification (webhook_config, version 4)."""

    status: str
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str
    endsAt: str | None = None
    generatorURL: str | None = None
    fingerprint: str | None = None


class AlertmanagerNotification(BaseModel):
    """The body Alertmanager posts to a webhook receiver."""

    version: str
    status: str
    receiver: str | None = None
    groupKey: str | None = None
    alerts: list[AlertmanagerAlert] = Field(min_length=1)
    externalURL: str | None = None


def parse_alertmanager(raw: bytes) -> AlertmanagerNotification:
    """The notification, or InvalidAlertError naming the problem."""
    try:
        return AlertmanagerNotification.model_validate_json(raw)
    except ValidationError as exc:
        raise InvalidAlertError(_describe(exc)) from exc


def _alertmanager_alert_id(alert: AlertmanagerAlert) -> str:
    """Stable per alert instance: Alertmanager's fingerprint (labels) plus when it started firing."""
    if "alert_id" in alert.labels and re.match(ALERT_ID_PATTERN, alert.labels["alert_id"]):
        return alert.labels["alert_id"]
    fingerprint = alert.fingerprint or hashlib.sha256(
        json.dumps(alert.labels, sort_keys=True).encode()).hexdigest()[:16]
    started = re.sub(r"[^0-9T]", "", alert.startsAt)[:15]
    return re.sub(r"[^A-Za-z0-9._:\-]", "-", f"am-{fingerprint}-{started}")[:200]


def autopsy_from_alertmanager(alert: AlertmanagerAlert, default_account: str) -> dict[str, Any]:
    """A loss alert for one firing Alertmanager alert.

    An `autopsy` annotation holding the full JSON autopsy wins; otherwise labels and annotations
    fill the fields the repair needs (account, severity, rule, mandate, root cause).
    """
    embedded = alert.annotations.get("autopsy")
    if embedded:
        try:
            autopsy = json.loads(embedded)
        except json.JSONDecodeError as exc:
            raise InvalidAlertError(f"annotation 'autopsy' is not JSON: {exc}") from exc
        if not isinstance(autopsy, dict):
            raise InvalidAlertError("annotation 'autopsy' must be a JSON object")
        autopsy.setdefault("alert_id", _alertmanager_alert_id(alert))
        return parse_loss_alert(json.dumps(autopsy).encode())
    labels, notes = alert.labels, alert.annotations
    if not labels.get("module", "").startswith("strategies."):
        raise InvalidAlertError("an Alertmanager alert needs a `module` label naming the strategy "
                                "(e.g. strategies.daily_momentum) or an `autopsy` annotation")
    # Not a full autopsy (no "event" key): the repair completes it from the ledger via the critic.
    return {
        "alert_id": _alertmanager_alert_id(alert),
        "account": labels.get("account", default_account),
        "as_of": alert.startsAt[:10],
        "severity": labels.get("severity", "warning"),
        "rule": labels.get("alertname", "alertmanager"),
        "diagnostics": {"root_cause": notes.get("summary") or notes.get("description") or "",
                        "module": labels["module"], "source": alert.generatorURL},
        "mandate": notes.get("mandate") or notes.get("description") or "",
        "source": "alertmanager",
    }
