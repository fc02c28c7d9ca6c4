"""Settings for oomrl, read from the environment (prefix OOMRL_) and an optional TOML config file.

Every value is validated when read; a bad one is a SettingsError naming the variable (or the
config file key) and what is wrong with it, never a traceback from deep inside a command.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError

from oomrl.errors import OomrlError
from oomrl.names import check_account
from oomrl.portfolio.reward import DEFAULT_GAMMA, DEFAULT_LAMBDA, DEFAULT_TERMINAL_PENALTY

ENV_PREFIX = "OOMRL_"


MAX_CONFIG_BYTES = 1024 * 1024
TABLE_SETTINGS = frozenset({"market_rules"})  # the settings whose value is itself a table


class SettingsError(OomrlError):
    """A setting (environment variable or config file key) is missing, malformed or out of range."""


def _config_path() -> tuple[Path, bool]:
    """The config file to read and whether OOMRL_CONFIG named it explicitly."""
    named = os.environ.get("OOMRL_CONFIG")
    if named is not None:
        if not named.strip():
            raise SettingsError("OOMRL_CONFIG is set but empty: name a TOML file or unset it")
        return Path(named).expanduser(), True
    home = Path(os.environ.get("OOMRL_HOME") or Path.home() / ".oomrl").expanduser()
    return home / "config.toml", False


def _read_config(path: Path) -> str:
    """The config file's text: a regular file of at most MAX_CONFIG_BYTES of UTF-8, else SettingsError
    naming it."""
    from oomrl.files import read_bounded

    raw = read_bounded(path, MAX_CONFIG_BYTES, f"config file {path}", SettingsError)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"config file {path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _config_file_values() -> dict[str, Any]:
    """Values from the TOML file named by OOMRL_CONFIG, or OOMRL_HOME/config.toml when present."""
    path, named = _config_path()
    if not path.exists():
        if named:
            raise SettingsError(f"OOMRL_CONFIG names {path}, which does not exist")
        return {}
    try:
        data = tomllib.loads(_read_config(path))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from exc
    if "oomrl" not in data:  # the whole file is oomrl's; its tables may configure other tools
        return _known_values(path, {k: v for k, v in data.items() if not isinstance(v, dict)
                                    or k in TABLE_SETTINGS}, "")
    if not isinstance(data["oomrl"], dict):
        raise SettingsError(f"config file {path}: [oomrl] must be a table")
    return _known_values(path, data["oomrl"], "oomrl.")


def _known_values(path: Path, table: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The settings of `table`; a misspelt key, or a table where a value belongs, is named (it would be
    silently ignored otherwise)."""
    unknown = sorted(f"[{prefix}{k}]" if isinstance(v, dict) else k for k, v in table.items()
                     if k not in Settings.model_fields)
    if unknown:
        raise SettingsError(f"config file {path}: unknown setting(s) {', '.join(unknown)}; "
                            f"known: {', '.join(Settings.model_fields)}")
    misplaced = sorted(k for k, v in table.items() if isinstance(v, dict) and k not in TABLE_SETTINGS)
    if misplaced:
        raise SettingsError(f"config file {path}: [{prefix}{misplaced[0]}] is a table, but {misplaced[0]} "
                            "takes a value (`key = value` under [oomrl])")
    return table


class _TomlSource(PydanticBaseSettingsSource):
    """Settings source that reads the optional TOML config file (lowest priority after defaults)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return _config_file_values()


class Settings(BaseSettings):
    """All runtime settings; paths default to folders under OOMRL_HOME."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", allow_inf_nan=False)

    home: Path = Field(default_factory=lambda: Path.home() / ".oomrl")
    ledger_url: str | None = None
    account: str = "paper"
    # CNY; the ledger keeps fen in 64-bit integers, so a trillion leaves room for every sum it books.
    initial_cash: float = Field(default=10_000_000.0, gt=0, le=1e12)
    # The principal loss at which the account halts; 1 means never.
    kill_threshold: float = Field(default=0.20, gt=0, le=1)
    # Sessions after a repair request during which further alerts of the same account, strategy
    # version and severity (or lower) ask for none: one cause, one repair (docs/operations.md).
    repair_cooldown_sessions: int = Field(default=5, ge=0)
    # Repair runs (live processes, paused or not) a flow may start beside; each holds a few hundred MB.
    repair_max_running: int = Field(default=4, ge=1, le=1000)
    reward_lambda: float = Field(default=DEFAULT_LAMBDA, ge=0)
    reward_gamma: float = Field(default=DEFAULT_GAMMA, ge=0)  # calibrated from the impact model (docs/portfolio.md)
    reward_terminal_penalty: float = Field(default=DEFAULT_TERMINAL_PENALTY, ge=0)  # Eq. 2's P_terminal
    market_rules: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-market rule overrides
    llm_provider: Literal["offline", "openai", "replay"] | None = None
    llm_base_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    llm_model: str = Field(default="gpt-4o-mini", min_length=1, max_length=128)  # the ledger's llm_calls.model
    llm_api_key: str | None = None
    # Strategy code runs only in a jail (bubblewrap); this runs it unjailed where none can be made,
    # and every replay, rebalance and decision table then says so (docs/gate.md, "The strategy host").
    unsafe_no_jail: bool = False
    # The bundled sample played forward (oomrl/data/sample_clock.py): an empty store is filled up to
    # this session, and each later ingest of the sample adds the next one. None (`off`): all at once.
    sample_clock: date | None = None

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
        """Each market's overrides build its rule set now, not mid-rebalance (one line per problem)."""
        for market, overrides in value.items():
            from oomrl.market.markets import get_market

            try:
                get_market(market).rules(overrides)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
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
        if value is None:
            return None
        return check_database_url(value)

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
        return (init_settings, env_settings, _TomlSource(settings_cls))

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
        """The agent provider: explicit, else `openai` when an endpoint is configured, else `offline`."""
        if self.llm_provider:
            return self.llm_provider
        return "openai" if self.llm_base_url or self.llm_api_key else "offline"

    def ensure_dirs(self) -> None:
        """Create the OOMRL_HOME folders, private to the user (0700)."""
        from oomrl.files import private_dir

        private_dir(self.home)
        for path in (self.data_dir, self.runs_dir):
            private_dir(path, tighten=True)


def check_database_url(value: str) -> str:
    """`value` when SQLAlchemy can parse it and its driver is installed, else ValueError saying why."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from oomrl.portfolio.ledger_tables import driver_url

    try:
        dialect = make_url(driver_url(value)).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise ValueError(f"not a database URL SQLAlchemy understands ({exc})") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:  # e.g. postgresql+asyncpg:// without asyncpg: found now, not mid-command
        raise ValueError(f"its database driver is not installed ({exc})") from None
    if getattr(dialect, "is_async", False):  # oomrl's engines are synchronous
        raise ValueError(f"{dialect.driver} is an async driver; name a synchronous one (e.g. postgresql+psycopg2://)")
    return value


def _source_of(field: str, init: dict[str, Any], prefix: str) -> str:
    """Where a setting's value came from, as the user would name it."""
    if field in init:
        return field
    env_name = prefix + field.upper()
    if env_name in os.environ:
        return env_name
    path, _ = _config_path()
    return f"{field} in {path}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(exc: ValidationError, init: dict[str, Any] | None = None, prefix: str = ENV_PREFIX) -> str:
    """One line per invalid setting: the variable, the value given, and what is wrong."""
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "settings"
        value = error.get("input")
        message = str(error["msg"]).removeprefix("Value error, ")
        if isinstance(value, float) and not math.isfinite(value):
            message = "must be a finite number"
        lines.append(f"{_source_of(field, init or {}, prefix)}={_shown(value)}: {message}")
    return "invalid setting: " + "; ".join(lines)


def configured(name: str) -> bool:
    """Whether a setting is given, by the environment or the config file, rather than left to its default."""
    return f"{ENV_PREFIX}{name.upper()}" in os.environ or name in _config_file_values()


def get_settings(**overrides: Any) -> Settings:
    """Fresh settings from the current environment (never cached, so tests can change it)."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(describe(exc, overrides)) from None
    except PydanticSettingsError as exc:  # a structured value (OOMRL_MARKET_RULES) that is not JSON
        found = re.search(r'field "(\w+)"', str(exc))
        name = ENV_PREFIX + found.group(1).upper() if found else "a setting"
        raise SettingsError(f"invalid setting: {name} is not valid JSON ({exc.__cause__ or exc})") from None
