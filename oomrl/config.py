"""Settings for oomrl, read from the environment (prefix OOMRL_) and an optional TOML config file."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from oomrl.portfolio.reward import DEFAULT_GAMMA, DEFAULT_LAMBDA, DEFAULT_TERMINAL_PENALTY


def _config_file_values() -> dict[str, Any]:
    """Values from the TOML file named by OOMRL_CONFIG, or OOMRL_HOME/config.toml when present."""
    named = os.environ.get("OOMRL_CONFIG")
    home = Path(os.environ.get("OOMRL_HOME", Path.home() / ".oomrl")).expanduser()
    path = Path(named).expanduser() if named else home / "config.toml"
    if not path.exists():
        if named:
            raise FileNotFoundError(f"OOMRL_CONFIG names {path}, which does not exist")
        return {}
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config file {path} is not valid TOML: {exc}") from exc
    return data.get("oomrl", data)


class _TomlSource(PydanticBaseSettingsSource):
    """Settings source that reads the optional TOML config file (lowest priority after defaults)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return _config_file_values()


class Settings(BaseSettings):
    """All runtime settings; paths default to folders under OOMRL_HOME."""

    model_config = SettingsConfigDict(env_prefix="OOMRL_", extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".oomrl")
    ledger_url: str | None = None
    account: str = "paper"
    initial_cash: float = 10_000_000.0
    kill_threshold: float = 0.20
    reward_lambda: float = DEFAULT_LAMBDA
    reward_gamma: float = DEFAULT_GAMMA  # calibrated from the impact model (docs/portfolio.md)
    reward_terminal_penalty: float = DEFAULT_TERMINAL_PENALTY  # Eq. 2's P_terminal
    market_rules: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-market rule overrides
    llm_provider: str | None = None
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = None

    @field_validator("home", mode="before")
    @classmethod
    def _expand_home(cls, value: Any) -> Path:
        return Path(value).expanduser()

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


def get_settings(**overrides: Any) -> Settings:
    """Fresh settings from the current environment (never cached, so tests can change it)."""
    return Settings(**overrides)
