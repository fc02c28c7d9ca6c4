"""The mandate's constraints: the lenient form the critic writes and cross-validation checks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Constraints(BaseModel):
    """The machine-checkable form of a mandate (docs/architecture.md §4.4): tests encode it,
    cross-validation checks it."""

    model_config = ConfigDict(extra="allow")

    rebalance: Literal["daily", "weekly", "biweekly", "monthly"] | None = None
    max_adv_participation: float | None = Field(default=None, gt=0, le=1)
    max_weekly_turnover: float | None = Field(default=None, gt=0, le=2)
