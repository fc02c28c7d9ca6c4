"""The market group: per-market rule overrides and the reward's friction terms."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, field_validator

from oomrl.calibration import DEFAULT_GAMMA, DEFAULT_LAMBDA, DEFAULT_TERMINAL_PENALTY
from oomrl.settings.sources import Group, own_variable


class MarketSettings(Group):
    """Markets and the reward (OOMRL_MARKET_RULES, OOMRL_REWARD_*, [oomrl.market])."""

    rules: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        json_schema_extra=own_variable("OOMRL_MARKET_RULES"),
        description="Rule overrides, a table per market (e.g. [oomrl.market.rules.cn]).",
    )
    reward_lambda: float = Field(
        DEFAULT_LAMBDA,
        ge=0,
        description="Eq. 1's linear friction lambda (return per unit of turnover).",
    )
    reward_gamma: float = Field(
        DEFAULT_GAMMA,
        ge=0,
        description="Eq. 1's impact gamma, from the impact model (return per sqrt of turnover).",
    )
    reward_terminal_penalty: float = Field(
        DEFAULT_TERMINAL_PENALTY,
        ge=0,
        description="Eq. 2's P_terminal, charged at a halt (units of starting capital).",
    )

    @field_validator("rules")
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
