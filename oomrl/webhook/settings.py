"""Webhook settings from the environment (prefix OOMRL_WEBHOOK_); the secret never comes from the repo."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from oomrl.config import get_settings
from oomrl.errors import OomrlError

MIN_SECRET_LENGTH = 16


class WebhookConfigError(OomrlError):
    """The webhook cannot start with this configuration."""


class WebhookSettings(BaseSettings):
    """How the webhook authenticates, bounds and forwards loss alerts."""

    model_config = SettingsConfigDict(env_prefix="OOMRL_WEBHOOK_", extra="ignore")

    secret: str | None = None
    alertmanager_token: str | None = None
    max_body_bytes: int = Field(default=256 * 1024, gt=0)
    tolerance_s: int = Field(default=300, gt=0)
    # "deployment": start the `repair` deployment through the Prefect API (returns a flow run id);
    # "event": emit `oomrl.loss.alert` and let the deployment's trigger start the run.
    mode: Literal["deployment", "event"] = "deployment"
    deployment: str = "repair/repair"
    # Whether runs started here skip the human approval of the mandate; off unless the operator says so.
    auto_approve: bool = False
    # Where seen alert ids are kept; defaults to the ledger database (SQLite under OOMRL_HOME).
    db_url: str | None = None

    def required_secret(self) -> str:
        """The shared HMAC secret, or a clear error when it is missing or too short to be one."""
        if not self.secret:
            raise WebhookConfigError(
                "OOMRL_WEBHOOK_SECRET is not set: the webhook refuses to start without a shared secret "
                "(generate one with `python -c 'import secrets; print(secrets.token_hex(32))'`)"
            )
        if len(self.secret) < MIN_SECRET_LENGTH:
            raise WebhookConfigError(
                f"OOMRL_WEBHOOK_SECRET is {len(self.secret)} characters; use at least {MIN_SECRET_LENGTH}"
            )
        return self.secret

    def store_url(self) -> str:
        """The SQLAlchemy URL of the delivery store."""
        return self.db_url or get_settings().ledger
