"""How Prometheus Alertmanager notifications map onto the repair's inputs (a loss alert or an
autopsy)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from oomrl.errors import InvalidAlertError, InvalidAutopsyError
from oomrl.names import ALERT_ID_MAX, ALERT_ID_PATTERN
from oomrl.repair.inputs import parse_json


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in exc.errors()
    )


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


def alertmanager_alert_id(alert: AlertmanagerAlert) -> str:
    """The `alert_id` label, else one stable per alert instance.

    That is Alertmanager's fingerprint (labels) plus when it started firing. A label that is no
    valid id is returned as it is. The door then refuses that alert by name. (`re.fullmatch`: `$`
    would also take a trailing newline.)
    """
    if "alert_id" in alert.labels:
        return alert.labels["alert_id"]
    fingerprint = (
        alert.fingerprint
        or hashlib.sha256(json.dumps(alert.labels, sort_keys=True).encode()).hexdigest()[:16]
    )
    started = re.sub(r"[^0-9T]", "", alert.startsAt)[:15]
    return re.sub(r"[^A-Za-z0-9._:\-]", "-", f"am-{fingerprint}-{started}")[:ALERT_ID_MAX]


def autopsy_from_alertmanager(alert: AlertmanagerAlert, default_account: str) -> dict[str, Any]:
    """The repair input for one firing Alertmanager alert.

    The repair's door validates it after this. An `autopsy` annotation holding the full JSON autopsy
    wins. Otherwise the alert becomes a loss alert (id, account label, start date). The repair
    completes it from the ledger.
    """
    embedded = alert.annotations.get("autopsy")
    if embedded:
        try:
            autopsy = parse_json(embedded.encode(), "annotation 'autopsy'")
        except InvalidAutopsyError as exc:
            raise InvalidAlertError(str(exc)) from None
        if not isinstance(autopsy, dict):
            raise InvalidAlertError("annotation 'autopsy' must be a JSON object")
        autopsy.setdefault("alert_id", alertmanager_alert_id(alert))
        return autopsy
    if "alert_id" in alert.labels and not re.fullmatch(ALERT_ID_PATTERN, alert.labels["alert_id"]):
        raise InvalidAlertError(
            f"label alert_id {alert.labels['alert_id'][:80]!r} is no alert id: it may only "
            "use letters, digits, '.', '_', ':' and '-', starting with a letter or digit"
        )
    return {
        "alert_id": alertmanager_alert_id(alert),
        "account": alert.labels.get("account", default_account),
        "as_of": alert.startsAt[:10],
    }
