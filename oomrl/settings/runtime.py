"""The runtime group: how this process runs (the broker kernel, report links, the Prefect API, the build)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class RuntimeSettings(BaseSettings):
    """Process knobs, most under names of their own (OOMRL_BROKER_KERNEL, PREFECT_API_URL, GIT_SHA)."""

    model_config = SettingsConfigDict(env_prefix="OOMRL_", extra="ignore", populate_by_name=True)

    broker_kernel: bool = Field(True, description=(
        "Compile the broker's fill loop with numba; `0` runs the numpy broker."))
    reports_url: str | None = Field(None, description=(
        "Base URL where browsers fetch the report files artifacts link (URL)."))
    prefect_api_url: str | None = Field(None, validation_alias=AliasChoices(
        "prefect_api_url", "PREFECT_API_URL"), description="The Prefect server the webhook uses (URL).")
    prefect_api_key: str | None = Field(None, validation_alias=AliasChoices(
        "prefect_api_key", "PREFECT_API_KEY"), description="Key of the Prefect API (secret).")
    git_sha: str | None = Field(None, validation_alias=AliasChoices("git_sha", "GIT_SHA"), description=(
        "The build's commit where no git checkout is at hand (a container image)."))

    @field_validator("broker_kernel", mode="before")
    @classmethod
    def _only_zero_is_off(cls, value: Any) -> Any:
        """As before the settings tree: the string `0` turns the kernel off, any other on."""
        return value != "0" if isinstance(value, str) else value

