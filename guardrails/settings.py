"""The gate's own settings (OOMRL_GATE_*): the Docker lock's image and the sandbox's uid."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class GateSettings(BaseSettings):
    """Gate knobs from the environment; guardrails reads no other settings (it imports nothing of
    oomrl)."""

    model_config = SettingsConfigDict(env_prefix="OOMRL_GATE_", extra="ignore")

    image: str = Field(
        "python:3.11-slim", min_length=1, description="Image of the Docker RO-lock's container."
    )
    sandbox_uid: int = Field(
        65534,
        ge=0,
        description=(
            "Unprivileged host uid the bubblewrap sandbox runs as when started by root (uid)."
        ),
    )
