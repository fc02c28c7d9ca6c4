"""Webhook settings from the environment (prefix OOMRL_WEBHOOK_); the secret never comes from the repo."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from oomrl.config import SettingsError, check_database_url, describe, get_settings
from oomrl.errors import OomrlError
from oomrl.events import REPAIR_DEPLOYMENT
from oomrl.repair_inputs import MAX_AUTOPSY_BYTES

MIN_SECRET_LENGTH = 16
ENV_PREFIX = "OOMRL_WEBHOOK_"


class WebhookConfigError(OomrlError):
    """The webhook cannot start with this configuration."""


class WebhookSettings(BaseSettings):
    """How the webhook authenticates, bounds and forwards loss alerts."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    secret: str | None = None
    alertmanager_token: str | None = None
    max_body_bytes: int = Field(default=MAX_AUTOPSY_BYTES, gt=0)
    tolerance_s: int = Field(default=300, gt=0)
    # "deployment": start the `repair` deployment through the Prefect API (returns a flow run id);
    # "event": emit `oomrl.loss.alert` and let the deployment's trigger start the run.
    mode: Literal["deployment", "event"] = "deployment"
    deployment: str = REPAIR_DEPLOYMENT
    # Whether runs started here skip the human approval of the mandate; off unless the operator says so.
    auto_approve: bool = False
    # Seconds a run started here waits for the reviewer before the timeout rejects it (unset: the
    # deployment's default, one hour).
    approval_timeout_s: int | None = Field(default=None, gt=0)
    # Where seen alert ids are kept; defaults to the ledger database (SQLite under OOMRL_HOME).
    db_url: str | None = None
    # Firing alerts one Alertmanager notification may carry (set `max_alerts` in its webhook_config).
    max_alerts: int = Field(default=20, ge=1, le=10_000)
    # New repair runs one account may start per minute, whatever the door (a flood of distinct alerts).
    max_runs_per_minute: int = Field(default=3, ge=1, le=10_000)

    @field_validator("db_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        return None if value is None else check_database_url(value)

    def required_secret(self) -> str:
        """The shared HMAC secret, or a clear error when it is missing or too short to be one."""
        if not self.secret:
            raise WebhookConfigError(
                "OOMRL_WEBHOOK_SECRET is not set: the webhook refuses to start without a shared secret "
                "(generate one with `python -c 'import secrets; print(secrets.token_hex(32))'`)"
            )
        if len(self.secret.strip()) < MIN_SECRET_LENGTH:
            raise WebhookConfigError(f"OOMRL_WEBHOOK_SECRET is {len(self.secret.strip())} characters; "
                                     f"use at least {MIN_SECRET_LENGTH}")
        return self.secret

    def required_token(self) -> str | None:
        """The Alertmanager bearer token when configured; refused when too short to be a secret."""
        token = self.alertmanager_token
        if token is not None and len(token.strip()) < MIN_SECRET_LENGTH:
            raise WebhookConfigError(
                f"OOMRL_WEBHOOK_ALERTMANAGER_TOKEN is {len(token.strip())} characters; use at least "
                f"{MIN_SECRET_LENGTH} (or unset it to require HMAC signatures on /hooks/alertmanager)")
        return token.strip() if token else None

    def store_url(self) -> str:
        """The SQLAlchemy URL of the delivery store."""
        return self.db_url or get_settings().ledger


def webhook_settings() -> WebhookSettings:
    """The webhook's settings from the environment; a bad value is a SettingsError naming its variable."""
    try:
        return WebhookSettings()
    except ValidationError as exc:
        raise SettingsError(describe(exc, prefix=ENV_PREFIX)) from None
