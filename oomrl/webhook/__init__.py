"""The loss-alert webhook: signed HTTP alerts in, `repair` flow runs (or `oomrl.loss.alert` events)
out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.webhook.alerts import AlertmanagerAlert, autopsy_from_alertmanager
    from oomrl.webhook.app import WebhookIntake, create_app
    from oomrl.webhook.deliveries import DELIVERIES, Delivery, DeliveryStore
    from oomrl.webhook.launch import Launch, Launcher, RunStatus, alert_event_resource
    from oomrl.webhook.reports import reports_router
    from oomrl.webhook.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify

__all__ = [
    "DELIVERIES",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "AlertmanagerAlert",
    "Delivery",
    "DeliveryStore",
    "Launch",
    "Launcher",
    "RunStatus",
    "WebhookIntake",
    "alert_event_resource",
    "autopsy_from_alertmanager",
    "create_app",
    "reports_router",
    "sign",
    "verify",
]
if not TYPE_CHECKING:  # a name loads its module on first use: the command line stays light
    __getattr__ = front_door(__name__, __file__)
