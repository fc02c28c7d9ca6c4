"""The event contract every producer and consumer shares.

It holds names, the account resource, ids, the repair deployment.
"""

from __future__ import annotations

import uuid

LOSS_ALERT_EVENT = "oomrl.loss.alert"  # payload: the autopsy; triggers the repair (prefect.yaml)
HALTED_EVENT = "oomrl.account.halted"  # the kill switch halted an account.
# A version took the account's capital (a repair, or a probation's end).
PROMOTED_EVENT = "oomrl.strategy.promoted"
# a repair's version trades a shadow book forward (oomrl/repair/probation.py)
PROBATION_EVENT = "oomrl.strategy.probation"
RETIRED_EVENT = "oomrl.strategy.retired"  # a challenger's probation ended without the capital.
# "yes" on a retired event that carries its forward autopsy.
FORWARD_AUTOPSY_LABEL = "oomrl.forward.autopsy"
# Event ids derive from alert ids.
# So one alert is one event id whichever path (flow or webhook) emits it.
EVENT_NAMESPACE = uuid.UUID("5b0f3f0e-6f6d-4d2c-9a59-6f6f6d726c21")
REPAIR_DEPLOYMENT = "repair/repair"  # <flow name>/<deployment name> in prefect.yaml


def account_resource(account: str) -> dict[str, str]:
    """The Prefect resource an account's events are about (docs/architecture.md §4.5)."""
    return {"prefect.resource.id": f"oomrl.account.{account}", "prefect.resource.name": account}


def event_id(alert_id: str) -> uuid.UUID:
    """The id of the loss-alert event for `alert_id`."""
    return uuid.uuid5(EVENT_NAMESPACE, alert_id)
