"""The agent group: a repair's compute budget, model call limits, attempts and the promotion
rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from oomrl.settings.sources import Group, own_variable


class AgentSettings(Group):
    """Agent knobs (OOMRL_AGENT_*, OOMRL_LLM_*, OOMRL_REPAIR_*, [oomrl.agent])."""

    ENV_PREFIX = "OOMRL_AGENT_"

    llm_provider: Literal["offline", "openai", "replay"] | None = Field(
        None,
        json_schema_extra=own_variable("OOMRL_LLM_PROVIDER"),
        description="Where answers come from; unset: openai given an endpoint, else offline.",
    )
    llm_base_url: str | None = Field(
        None,
        pattern=r"^https?://\S+$",
        json_schema_extra=own_variable("OOMRL_LLM_BASE_URL"),
        description="An OpenAI-compatible endpoint (URL).",
    )
    llm_model: str = Field(
        "gpt-4o-mini",
        min_length=1,
        max_length=128,
        json_schema_extra=own_variable("OOMRL_LLM_MODEL"),
        description="The model asked; the ledger's llm_calls.model (name).",
    )
    llm_api_key: str | None = Field(
        None,
        json_schema_extra=own_variable("OOMRL_LLM_API_KEY"),
        description="Key of the LLM endpoint (secret).",
    )
    repair_cooldown_sessions: int = Field(
        5,
        ge=0,
        json_schema_extra=own_variable("OOMRL_REPAIR_COOLDOWN_SESSIONS"),
        description="Sessions after a repair request when like alerts ask for none (sessions).",
    )
    repair_max_running: int = Field(
        4,
        ge=1,
        le=1000,
        json_schema_extra=own_variable("OOMRL_REPAIR_MAX_RUNNING"),
        description="Repair runs a flow may start beside, paused or not (runs).",
    )

    max_tokens: int = Field(400_000, gt=0, description="Tokens one repair may spend (tokens).")
    max_cost_usd: float = Field(2.0, gt=0, description="Money one repair may spend (USD).")
    account_max_tokens: int = Field(
        4_000_000,
        gt=0,
        description=(
            "Tokens an account starts with the first time it repairs, kept in the ledger (tokens)."
        ),
    )
    account_max_cost_usd: float = Field(
        20.0,
        gt=0,
        description=(
            "Money an account starts with the first time it repairs, kept in the ledger (USD)."
        ),
    )
    price_prompt_per_mtok: float = Field(
        0.15,
        ge=0,
        description=(
            "Price of prompt tokens; the default is gpt-4o-mini's list price (USD per "
            "million tokens)."
        ),
    )
    price_completion_per_mtok: float = Field(
        0.60,
        ge=0,
        description=(
            "Price of answer tokens; the default is gpt-4o-mini's list price (USD per "
            "million tokens)."
        ),
    )
    timeout_s: float = Field(
        120.0,
        gt=0,
        description=(
            "Timeout of one socket operation; a dripping server never trips it (seconds)."
        ),
    )
    request_deadline_s: float = Field(
        300.0,
        gt=0,
        description=("Deadline of one whole request: connect, send, the entire answer (seconds)."),
    )
    repair_llm_deadline_s: float = Field(
        3600.0,
        gt=0,
        description=("Deadline of every model call of one repair, retries included (seconds)."),
    )
    retries: int = Field(4, ge=0, description="Retries of a failed model call (count).")
    backoff_s: float = Field(
        1.0, ge=0, description="First pause between retries, doubled each time (seconds)."
    )
    max_answer_chars: int = Field(
        200_000, gt=0, description="Longest answer read from a model (characters)."
    )
    max_output_tokens: int = Field(
        8_000, gt=0, description="Answer tokens asked for per call (tokens)."
    )
    min_output_tokens: int = Field(
        1_000,
        gt=0,
        description=("A call that cannot be given this many answer tokens is not sent (tokens)."),
    )
    json_mode: bool = Field(True, description="Ask the model for JSON answers.")
    max_attempts: int = Field(
        8,
        ge=2,
        description=(
            "Role answers per repair, over every phase and round; each is judged or "
            "refused (count)."
        ),
    )
    max_rounds: int = Field(
        2,
        ge=1,
        description=(
            "Times a cross-validation failure may send the repair back to test genesis, "
            "plus one (count)."
        ),
    )
    holdout_dir: Path | None = Field(
        None,
        description=(
            "Held-out tests the gate runs on every code patch; the Coder never sees them (folder)."
        ),
    )
    cross_validation_days: int = Field(
        120, ge=2, description="Sessions of the cross-validation window (days)."
    )
    promotion_test: Literal["non-inferiority", "superiority"] = Field(
        "non-inferiority",
        description=(
            "The promotion rule's test (oomrl/repair/crossval.py PromotionRule; README: why this "
            "default)."
        ),
    )
    promotion_margin: float = Field(
        0.0,
        ge=0,
        description=(
            "Margin of the promotion test, annualized: 0.05 is 5 % a year (fraction a year)."
        ),
    )
    promotion_z: float = Field(
        0.0,
        ge=0,
        description=(
            "Standard errors taken off the mean difference by the promotion test (standard errors)."
        ),
    )
    probation_sessions: int = Field(
        20,
        ge=0,
        description=(
            "Shadow sessions a passing candidate trades before it takes the capital; 0: none "
            "(sessions)."
        ),
    )

    @field_validator("llm_provider", "llm_base_url", "llm_api_key", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def llm_provider_name(self) -> str:
        """The provider: explicit, else `openai` given an endpoint, else `offline`."""
        if self.llm_provider:
            return self.llm_provider
        return "openai" if self.llm_base_url or self.llm_api_key else "offline"
