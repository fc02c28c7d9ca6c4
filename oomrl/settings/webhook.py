"""The webhook group: how the webhook authenticates, bounds and forwards loss alerts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from oomrl.errors import WebhookConfigError
from oomrl.events import REPAIR_DEPLOYMENT
from oomrl.settings.sources import Group
from oomrl.settings.urls import check_database_url

MIN_SECRET_LENGTH = 16
MAX_BODY_BYTES = 256 * 1024  # oomrl.repair.inputs.MAX_AUTOPSY_BYTES, the autopsy's own bound


class WebhookSettings(Group):
    """Webhook settings (OOMRL_WEBHOOK_*, [oomrl.webhook]); the secret never comes from the repo."""

    ENV_PREFIX = "OOMRL_WEBHOOK_"

    secret: str | None = Field(
        None, description="Shared HMAC secret of signed deliveries (secret)."
    )
    alertmanager_token: str | None = Field(
        None,
        description=(
            "Bearer token Alertmanager sends to /hooks/alertmanager; unset: HMAC "
            "signatures only (secret)."
        ),
    )
    max_body_bytes: int = Field(
        MAX_BODY_BYTES, gt=0, description="Largest request body read (bytes)."
    )
    tolerance_s: int = Field(300, gt=0, description="Age a signed timestamp may have (seconds).")
    mode: Literal["deployment", "event"] = Field(
        "deployment",
        description=(
            "`deployment` starts the repair run through the Prefect API. "
            "`event` emits oomrl.loss.alert; the deployment's trigger starts the run."
        ),
    )
    deployment: str = Field(
        REPAIR_DEPLOYMENT, description="The repair deployment (<flow>/<deployment>)."
    )
    auto_approve: bool = Field(
        False, description="Runs started here skip the mandate's human approval; off by default."
    )
    approval_timeout_s: int | None = Field(
        None,
        gt=0,
        description=(
            "Wait for the reviewer before the timeout rejects a run; unset: the "
            "deployment's hour (seconds)."
        ),
    )
    db_url: str | None = Field(
        None,
        description=("Where seen alert ids are kept; unset: the ledger database (SQLAlchemy URL)."),
    )
    max_alerts: int = Field(
        20,
        ge=1,
        le=10_000,
        description=("Firing alerts one Alertmanager notification may carry (alerts)."),
    )
    max_runs_per_minute: int = Field(
        3,
        ge=1,
        le=10_000,
        description=(
            "New repair runs one account may start per minute, whatever the door (runs a minute)."
        ),
    )

    @field_validator("db_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        return None if value is None else check_database_url(value)

    def required_secret(self) -> str:
        """The shared HMAC secret, or a clear error when it is missing or too short to be one."""
        if not self.secret:
            raise WebhookConfigError(
                "OOMRL_WEBHOOK_SECRET is not set: the webhook refuses to start without a "
                "shared secret "
                "(generate one with `python -c 'import secrets; print(secrets.token_hex(32))'`)"
            )
        if len(self.secret.strip()) < MIN_SECRET_LENGTH:
            raise WebhookConfigError(
                f"OOMRL_WEBHOOK_SECRET is {len(self.secret.strip())} characters; "
                f"use at least {MIN_SECRET_LENGTH}"
            )
        return self.secret

    def required_token(self) -> str | None:
        """The Alertmanager bearer token when configured; refused when too short to be a secret."""
        token = self.alertmanager_token
        if token is not None and len(token.strip()) < MIN_SECRET_LENGTH:
            raise WebhookConfigError(
                f"OOMRL_WEBHOOK_ALERTMANAGER_TOKEN is {len(token.strip())} characters; use "
                "at least "
                f"{MIN_SECRET_LENGTH} (or unset it to require HMAC signatures on "
                "/hooks/alertmanager)"
            )
        return token.strip() if token else None

    def store_url(self, ledger_url: str) -> str:
        """The SQLAlchemy URL of the delivery store: its own, else the ledger's (`ledger_url`)."""
        return self.db_url or ledger_url
