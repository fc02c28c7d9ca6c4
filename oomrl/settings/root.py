"""The root of the settings tree: six groups, and how they are read.

Sources, highest first: keyword overrides, the environment (OOMRL_AGENT_<NAME>, OOMRL_HOME, ...),
the config file's tables ([oomrl.agent], ...), defaults. A bad value is a SettingsError naming
its variable or config key, never a traceback from deep in a command.

Groups: store (the home folder), ledger (database, account, cash, kill line), market (rules,
reward terms), agent (model, budget, repairs), webhook, runtime (this process). The home is in
store: `settings_for(home)` overrides that one field, the rest still come from their sources.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from oomrl.errors import SettingsError
from oomrl.settings.agent import AgentSettings
from oomrl.settings.ledger import LedgerSettings
from oomrl.settings.market import MarketSettings
from oomrl.settings.runtime import RuntimeSettings
from oomrl.settings.sources import Group, group_environment, is_set, upper_environment, variable_of
from oomrl.settings.store import StoreSettings
from oomrl.settings.toml import config_file_values, config_path
from oomrl.settings.webhook import WebhookSettings

ENV_PREFIX = "OOMRL_"
GROUPS: dict[str, type[Group]] = {
    "store": StoreSettings,
    "ledger": LedgerSettings,
    "market": MarketSettings,
    "agent": AgentSettings,
    "webhook": WebhookSettings,
    "runtime": RuntimeSettings,
}
# Keys once flat under [oomrl], by their place now: an old config file is told where each went.
MOVED = {
    "home": "store.home",
    "sample_clock": "store.sample_clock",
    "ledger_url": "ledger.url",
    "account": "ledger.account",
    "initial_cash": "ledger.initial_cash",
    "kill_threshold": "ledger.kill_threshold",
    "market_rules": "market.rules",
    "reward_lambda": "market.reward_lambda",
    "reward_gamma": "market.reward_gamma",
    "reward_terminal_penalty": "market.reward_terminal_penalty",
    "llm_provider": "agent.llm_provider",
    "llm_base_url": "agent.llm_base_url",
    "llm_model": "agent.llm_model",
    "llm_api_key": "agent.llm_api_key",
    "repair_cooldown_sessions": "agent.repair_cooldown_sessions",
    "repair_max_running": "agent.repair_max_running",
    "unsafe_no_jail": "runtime.unsafe_no_jail",
}


def file_values() -> dict[str, Any]:
    """The config file's group tables (empty without a file)."""
    return config_file_values(GROUPS, GROUPS, MOVED)


class _TomlSource(PydanticBaseSettingsSource):
    """The optional TOML config file (lowest priority after defaults)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return file_values()


class _GroupsEnvSource(PydanticBaseSettingsSource):
    """Each group's variables (OOMRL_AGENT_*, OOMRL_HOME, PREFECT_API_URL, ...)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        env = upper_environment()
        found = {name: group_environment(group, env) for name, group in GROUPS.items()}
        return {name: values for name, values in found.items() if values}


class OomrlSettings(BaseSettings):
    """Every setting of oomrl, one group a field."""

    # An override naming no group (`get_settings(home=...)`, the old flat form) is refused.
    model_config = SettingsConfigDict(extra="forbid")

    store: StoreSettings = Field(default_factory=StoreSettings, description="The home folder.")
    ledger: LedgerSettings = Field(
        default_factory=LedgerSettings, description="The ledger and its accounts."
    )
    market: MarketSettings = Field(
        default_factory=MarketSettings, description="Market rules and reward terms."
    )
    agent: AgentSettings = Field(
        default_factory=AgentSettings, description="The agent's model, budget and limits."
    )
    webhook: WebhookSettings = Field(
        default_factory=WebhookSettings, description="The webhook's door."
    )
    runtime: RuntimeSettings = Field(
        default_factory=RuntimeSettings, description="How this process runs."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _GroupsEnvSource(settings_cls), _TomlSource(settings_cls))

    @property
    def ledger_url(self) -> str:
        """The ledger's SQLAlchemy URL: ledger.url, else SQLite in the home folder."""
        return self.ledger.url or f"sqlite:///{self.store.home / 'ledger.db'}"


def env_name(loc: tuple[str, ...]) -> str:
    """The environment variable of a setting by its path (`("agent", "max_tokens")`)."""
    if len(loc) == 2 and loc[0] in GROUPS and loc[1] in GROUPS[loc[0]].model_fields:
        return variable_of(GROUPS[loc[0]], loc[1])
    return "a setting"


def variables() -> dict[str, FieldInfo]:
    """Every setting's field by its environment variable."""
    return {
        env_name((group, name)): info
        for group, cls in GROUPS.items()
        for name, info in cls.model_fields.items()
    }


def given_by(
    loc: tuple[str, ...], from_file: dict[str, Any] | None = None, env: dict[str, str] | None = None
) -> str:
    """Where a setting's value comes from: `env`, `config.toml` or `default`.

    The one place that decides it, matching variables as the sources read them (ignoring case).
    `from_file` and `env`: the config file's group tables and `upper_environment()`, when already
    read (the listing asks of every setting)."""
    if is_set(env_name(loc), env):
        return "env"
    tables = file_values() if from_file is None else from_file
    return "config.toml" if loc[-1] in (tables.get(loc[0]) or {}) else "default"


def _source_of(loc: tuple[str, ...], init: dict[str, Any]) -> str:
    """Where a setting's value came from, as the user would name it."""
    if loc[0] in init:
        return ".".join(loc)
    if is_set(env_name(loc)):
        return env_name(loc)
    path, _ = config_path()
    return f"{'.'.join(loc)} in {path}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(
    exc: ValidationError, init: dict[str, Any] | None = None, group: str | None = None
) -> str:
    """One line per invalid setting: the variable, the value given, and what is wrong.

    `group` names the group a group class's own errors belong to (their paths start below it)."""
    lines = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"][:2]) or ("settings",)
        loc = (group, loc[0]) if group else loc
        value = error.get("input")
        message = str(error["msg"]).removeprefix("Value error, ")
        if isinstance(value, float) and not math.isfinite(value):
            message = "must be a finite number"
        lines.append(f"{_source_of(loc, init or {})}={_shown(value)}: {message}")
    return "invalid setting: " + "; ".join(lines)


def configured(name: str) -> bool:
    """Whether a setting (dotted: `store.sample_clock`) is given by the environment or the file."""
    group, field = name.split(".")
    return given_by((group, field)) != "default"


def get_settings(**overrides: Any) -> OomrlSettings:
    """Fresh settings from the environment and config file (never cached: tests change them)."""
    try:
        return OomrlSettings(**overrides)
    except ValidationError as exc:
        raise SettingsError(describe(exc, overrides)) from None


def settings_for(home: Path | str | None = None) -> OomrlSettings:
    """The settings, with `home` (when given) over OOMRL_HOME: the one way to read them for a
    home."""
    return get_settings(store={"home": home}) if home else get_settings()
