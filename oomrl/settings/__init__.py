"""One settings tree for oomrl: a root (`OomrlSettings`) with groups, fed by the environment and
config.toml."""

from __future__ import annotations

from pydantic import ValidationError

from oomrl.errors import SettingsError, WebhookConfigError
from oomrl.settings.agent import AgentSettings
from oomrl.settings.ledger import LedgerSettings
from oomrl.settings.market import MarketSettings
from oomrl.settings.process import child_environment, environment
from oomrl.settings.root import (
    ENV_PREFIX,
    GROUPS,
    OomrlSettings,
    configured,
    describe,
    env_name,
    get_settings,
    settings_for,
    variables,
)
from oomrl.settings.runtime import RuntimeSettings
from oomrl.settings.sources import group_environment
from oomrl.settings.store import StoreSettings
from oomrl.settings.toml import MAX_CONFIG_BYTES
from oomrl.settings.urls import check_database_url, driver_url
from oomrl.settings.webhook import MIN_SECRET_LENGTH, WebhookSettings

__all__ = [
    "ENV_PREFIX",
    "GROUPS",
    "MAX_CONFIG_BYTES",
    "MIN_SECRET_LENGTH",
    "AgentSettings",
    "LedgerSettings",
    "MarketSettings",
    "OomrlSettings",
    "RuntimeSettings",
    "SettingsError",
    "StoreSettings",
    "WebhookConfigError",
    "WebhookSettings",
    "check_database_url",
    "child_environment",
    "configured",
    "describe",
    "driver_url",
    "env_name",
    "environment",
    "get_settings",
    "runtime_from_environment",
    "settings_for",
    "variables",
    "webhook_settings",
]


def webhook_settings() -> WebhookSettings:
    """The webhook group of the settings; a bad value is a SettingsError naming its variable."""
    return get_settings().webhook


def runtime_from_environment() -> RuntimeSettings:
    """The runtime group from the environment alone, config.toml unread.

    For a jailed strategy host: it may not read the operator's config file."""
    try:
        return RuntimeSettings.model_validate(group_environment(RuntimeSettings))
    except ValidationError as exc:
        raise SettingsError(describe(exc, group="runtime")) from None
