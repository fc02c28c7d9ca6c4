"""The root of the settings tree: flat settings at the top, groups beneath, and how they are read.

Sources, highest first: keyword overrides, the environment (OOMRL_<NAME>, OOMRL_AGENT_<NAME>, ...),
the config file, defaults. Every value is validated when read; a bad one is a SettingsError naming
the variable (or the config file key) and what is wrong, never a traceback from deep in a command.
"""

from __future__ import annotations

import math
import os
import re
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings import SettingsError as PydanticSettingsError

from oomrl.calibration import DEFAULT_GAMMA, DEFAULT_LAMBDA, DEFAULT_TERMINAL_PENALTY
from oomrl.errors import SettingsError
from oomrl.names import check_account
from oomrl.settings.agent import AgentSettings
from oomrl.settings.runtime import RuntimeSettings
from oomrl.settings.sources import Group, group_environment, variable_of
from oomrl.settings.toml import config_file_values, config_path
from oomrl.settings.urls import check_database_url
from oomrl.settings.webhook import WebhookSettings

ENV_PREFIX = "OOMRL_"
GROUPS: dict[str, type[Group]] = {
    "agent": AgentSettings,
    "webhook": WebhookSettings,
    "runtime": RuntimeSettings,
}
TABLE_SETTINGS = frozenset({"market_rules", *GROUPS})  # the settings whose value is itself a table


class _TomlSource(PydanticBaseSettingsSource):
    """The optional TOML config file (lowest priority after defaults)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return config_file_values(OomrlSettings.model_fields, TABLE_SETTINGS)


class _FlatEnvSource(EnvSettingsSource):
    """OOMRL_<NAME> for the flat settings; the groups have sources of their own."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field_name in GROUPS:
            return None, field_name, False
        return super().get_field_value(field, field_name)


class _GroupsEnvSource(PydanticBaseSettingsSource):
    """Each group's variables under its own names (OOMRL_AGENT_*, OOMRL_WEBHOOK_*,
    PREFECT_API_URL)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        found = {name: group_environment(group) for name, group in GROUPS.items()}
        return {name: values for name, values in found.items() if values}


class OomrlSettings(BaseSettings):
    """Every setting of oomrl; paths default to folders under OOMRL_HOME."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", allow_inf_nan=False)

    home: Path = Field(
        default_factory=lambda: Path.home() / ".oomrl",
        description=("Where oomrl keeps its data, ledger, runs and workspace (folder)."),
    )
    ledger_url: str | None = Field(
        None,
        description=("The ledger database; unset: SQLite in the home folder (SQLAlchemy URL)."),
    )
    account: str = Field("paper", description="The account commands act on by default.")
    # The ledger keeps fen in 64-bit integers, so a trillion leaves room for every sum it books.
    initial_cash: float = Field(
        10_000_000.0, gt=0, le=1e12, description="Cash an account opens with (CNY)."
    )
    kill_threshold: float = Field(
        0.20,
        gt=0,
        le=1,
        description=(
            "Principal loss at which the account halts; 1 means never (fraction of principal)."
        ),
    )
    repair_cooldown_sessions: int = Field(
        5,
        ge=0,
        description=(
            "Sessions after a repair request during which further alerts of the same "
            "account, version "
            "and severity (or lower) ask for none: one cause, one repair (sessions)."
        ),
    )
    repair_max_running: int = Field(
        4,
        ge=1,
        le=1000,
        description=(
            "Repair runs a flow may start beside, paused or not; each holds a few hundred "
            "MB (runs)."
        ),
    )
    reward_lambda: float = Field(
        DEFAULT_LAMBDA,
        ge=0,
        description=("Eq. 1's linear friction lambda (return per unit of turnover)."),
    )
    reward_gamma: float = Field(
        DEFAULT_GAMMA,
        ge=0,
        description=(
            "Eq. 1's impact gamma, calibrated from the impact model (return per sqrt of turnover)."
        ),
    )
    reward_terminal_penalty: float = Field(
        DEFAULT_TERMINAL_PENALTY,
        ge=0,
        description=(
            "Eq. 2's P_terminal, taken off the reward when the account halts (units of "
            "starting capital)."
        ),
    )
    market_rules: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            "Per-market rule overrides, a table per market (e.g. [oomrl.market_rules.cn])."
        ),
    )
    llm_provider: Literal["offline", "openai", "replay"] | None = Field(
        None,
        description=(
            "Where the agent's answers come from; unset: openai when an endpoint is "
            "configured, else offline."
        ),
    )
    llm_base_url: str | None = Field(
        None, pattern=r"^https?://\S+$", description=("An OpenAI-compatible endpoint (URL).")
    )
    llm_model: str = Field(
        "gpt-4o-mini",
        min_length=1,
        max_length=128,
        description=("The model asked; the ledger's llm_calls.model."),
    )
    llm_api_key: str | None = Field(None, description="Key of the LLM endpoint (secret).")
    unsafe_no_jail: bool = Field(
        False,
        description=(
            "Run strategy code unjailed where no jail can be made; every replay then says "
            "so (docs/gate.md)."
        ),
    )
    sample_clock: date | None = Field(
        None,
        description=(
            "The bundled sample played forward up to this session; `off`: all at once (date)."
        ),
    )
    agent: AgentSettings = Field(
        default_factory=AgentSettings, description="The agent's budget and limits."
    )
    webhook: WebhookSettings = Field(
        default_factory=WebhookSettings, description="The webhook's door."
    )
    runtime: RuntimeSettings = Field(
        default_factory=RuntimeSettings, description="How this process runs."
    )

    @field_validator("home", mode="before")
    @classmethod
    def _expand_home(cls, value: Any) -> Path:
        if not str(value).strip():
            raise ValueError("must name a folder, not be empty")
        home = Path(value).expanduser()
        if home.exists() and not home.is_dir():
            raise ValueError("is a file, not a folder")
        return home

    @field_validator("market_rules")
    @classmethod
    def _known_rules(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each market's overrides build its rule set now, not mid-rebalance (one line per
        problem)."""
        for market, overrides in value.items():
            from oomrl.market.markets import get_market  # the one way down: markets own their rules

            try:
                get_market(market).rules(overrides)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
                )
                raise ValueError(f"{market}: {problems}") from None
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("account")
    @classmethod
    def _account_name(cls, value: str) -> str:
        return check_account(value)

    @field_validator("ledger_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        return None if value is None else check_database_url(value)

    @field_validator("llm_provider", "llm_base_url", "llm_api_key", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("sample_clock", mode="before")
    @classmethod
    def _clock_off(cls, value: Any) -> Any:
        """`off` (or empty) turns the sample clock off; anything else must be a date."""
        return None if isinstance(value, str) and value.strip().lower() in ("", "off") else value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            _FlatEnvSource(settings_cls),
            _GroupsEnvSource(settings_cls),
            _TomlSource(settings_cls),
        )

    # Folders and URLs derived from one root, one property each; server.StackConfig and the gate's
    # GateDirs are alike in shape with roots and names of their own.
    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def workspace_dir(self) -> Path:
        return self.home / "workspace"

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"

    @property
    def ledger(self) -> str:
        """The SQLAlchemy URL of the ledger: OOMRL_LEDGER_URL or SQLite in OOMRL_HOME."""
        return self.ledger_url or f"sqlite:///{self.home / 'ledger.db'}"

    @property
    def llm_provider_name(self) -> str:
        """The agent provider: explicit, else `openai` when an endpoint is configured, else
        `offline`."""
        if self.llm_provider:
            return self.llm_provider
        return "openai" if self.llm_base_url or self.llm_api_key else "offline"

    def ensure_dirs(self) -> None:
        """Create the OOMRL_HOME folders, private to the user (0700)."""
        from oomrl.files import private_dir

        private_dir(self.home)
        for path in (self.data_dir, self.runs_dir):
            private_dir(path, tighten=True)


def env_name(loc: tuple[str, ...]) -> str:
    """The environment variable of a setting by its path (`("agent", "max_tokens")`)."""
    if len(loc) == 2 and loc[0] in GROUPS:
        return variable_of(GROUPS[loc[0]], loc[1])
    return f"{ENV_PREFIX}{loc[0]}".upper()


def variables() -> dict[str, FieldInfo]:
    """Every setting's field by its environment variable, the groups' included."""
    found = {env_name((name,)): info for name, info in OomrlSettings.model_fields.items()}
    for group, cls in GROUPS.items():
        found.update({env_name((group, name)): info for name, info in cls.model_fields.items()})
    return {name: info for name, info in found.items() if info.annotation not in GROUPS.values()}


def _source_of(loc: tuple[str, ...], init: dict[str, Any]) -> str:
    """Where a setting's value came from, as the user would name it."""
    if loc[0] in init:
        return ".".join(loc)
    if env_name(loc) in os.environ:
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
    """Whether a flat setting is given, by the environment or the config file, rather than left to
    its default."""
    return env_name((name,)) in os.environ or name in config_file_values(
        OomrlSettings.model_fields, TABLE_SETTINGS
    )


def get_settings(**overrides: Any) -> OomrlSettings:
    """Fresh settings from the current environment and config file (never cached, so tests can
    change them)."""
    try:
        return OomrlSettings(**overrides)
    except ValidationError as exc:
        raise SettingsError(describe(exc, overrides)) from None
    except PydanticSettingsError as exc:  # a structured value (OOMRL_MARKET_RULES) that is not JSON
        found = re.search(r'field "(\w+)"', str(exc))
        name = ENV_PREFIX + found.group(1).upper() if found else "a setting"
        raise SettingsError(
            f"invalid setting: {name} is not valid JSON ({exc.__cause__ or exc})"
        ) from None


def settings_for(home: Path | str | None = None) -> OomrlSettings:
    """The settings, with `home` (when given) over OOMRL_HOME: the one way to read them for a
    home."""
    return get_settings(home=home) if home else get_settings()
