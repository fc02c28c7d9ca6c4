"""The per-repair compute budget (tokens and money): compute is capital, and running out ends the repair."""

from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from oomrl.errors import OutOfMoneyError


class AgentSettings(BaseSettings):
    """Agent knobs from the environment (prefix OOMRL_AGENT_): limits, prices, retries, attempts."""

    model_config = SettingsConfigDict(env_prefix="OOMRL_AGENT_", extra="ignore")

    max_tokens: int = 400_000
    max_cost_usd: float = 2.0
    # USD per million tokens; defaults are gpt-4o-mini list prices.
    price_prompt_per_mtok: float = 0.15
    price_completion_per_mtok: float = 0.60
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 1.0
    max_answer_chars: int = 200_000
    max_output_tokens: int = 8_000
    json_mode: bool = True
    attempts: int = 3
    # An annualized IR measured over n sessions has a standard error of about sqrt(252 / n): 1.45
    # over the default 120. A tolerance of 0.5 (a third of that) rejects clearly worse candidates
    # without rejecting on noise.
    ir_tolerance: float = 0.5
    cross_validation_days: int = 120


class Usage(BaseModel):
    """Tokens one response used, as the `usage` field reports them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Budget(BaseModel):
    """Token and money limits for one repair, and what has been spent against them."""

    max_tokens: int = Field(gt=0)
    max_cost_usd: float = Field(gt=0)
    price_prompt_per_mtok: float = Field(ge=0)
    price_completion_per_mtok: float = Field(ge=0)
    tokens_spent: int = 0
    cost_spent_usd: float = 0.0
    calls: int = 0

    @classmethod
    def from_settings(cls, settings: AgentSettings | None = None) -> Budget:
        """A fresh budget with the configured limits and prices."""
        s = settings or AgentSettings()
        return cls(max_tokens=s.max_tokens, max_cost_usd=s.max_cost_usd,
                   price_prompt_per_mtok=s.price_prompt_per_mtok,
                   price_completion_per_mtok=s.price_completion_per_mtok)

    def cost_of(self, usage: Usage) -> float:
        """Money a response cost at the configured prices."""
        return (usage.prompt_tokens * self.price_prompt_per_mtok
                + usage.completion_tokens * self.price_completion_per_mtok) / 1_000_000

    @property
    def tokens_left(self) -> int:
        return max(0, self.max_tokens - self.tokens_spent)

    @property
    def exhausted(self) -> bool:
        return self.tokens_spent >= self.max_tokens or self.cost_spent_usd >= self.max_cost_usd

    def ensure_available(self) -> None:
        """Refuse to start another call once the budget is spent."""
        if self.exhausted:
            raise OutOfMoneyError(self._message("no budget left for another call"))

    def charge(self, usage: Usage) -> None:
        """Book a response's usage; raise OutOfMoneyError when that crosses a limit."""
        self.calls += 1
        self.tokens_spent += usage.total_tokens
        self.cost_spent_usd += self.cost_of(usage)
        if self.tokens_spent > self.max_tokens or self.cost_spent_usd > self.max_cost_usd:
            raise OutOfMoneyError(self._message("budget exceeded"))

    def summary(self) -> dict[str, float | int]:
        """Spent and limits, for artifacts and the version metadata."""
        return {"calls": self.calls, "tokens_spent": self.tokens_spent,
                "max_tokens": self.max_tokens, "cost_spent_usd": round(self.cost_spent_usd, 6),
                "max_cost_usd": self.max_cost_usd}

    def _message(self, what: str) -> str:
        return (f"out of money: {what} (tokens {self.tokens_spent}/{self.max_tokens}, "
                f"cost ${self.cost_spent_usd:.4f}/${self.max_cost_usd:.4f})")
