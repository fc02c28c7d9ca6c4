"""The one factory of run settings (RebalanceSetup) shared by the service, the demo, replay and
cross-validation.

Every path that trades builds its setup here. So none can drop the point-in-time membership, the
market's rules or the reward settings. Membership is a required argument: the store's snapshots,
or None only when the store holds none. The rules come from the market with the settings'
overrides. lambda, gamma, P_terminal and tau come from the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from oomrl.errors import OomrlError
from oomrl.market.markets import get_market
from oomrl.market.rules import FrictionRules
from oomrl.portfolio.hosting import StrategySource
from oomrl.portfolio.reward import DEFAULT_GAMMA, DEFAULT_LAMBDA, DEFAULT_TERMINAL_PENALTY
from oomrl.settings import OomrlSettings


@dataclass
class RebalanceSetup:
    """The strategy and friction settings a rebalance runs with."""

    strategy: StrategySource
    params: dict[str, Any] | None  # validated by the strategy's Params model in its host
    version: str
    rules: FrictionRules
    lam: float = DEFAULT_LAMBDA
    gamma: float = DEFAULT_GAMMA
    kill_threshold: float = 0.20
    membership: pd.DataFrame | None = None
    terminal_penalty: float = DEFAULT_TERMINAL_PENALTY


def market_rules(settings: OomrlSettings, market: str = "cn") -> FrictionRules:
    """The market's rule set with the settings' overrides (`market_rules = {"us": {...}}`)."""
    overrides = settings.market.rules.get(market, {})
    try:
        return get_market(market).rules(overrides)
    except ValueError as exc:
        raise OomrlError(f"invalid market rules for {market!r}: {exc}") from exc


def rebalance_setup(
    strategy: StrategySource,
    version: str,
    settings: OomrlSettings,
    membership: pd.DataFrame | None,
    *,
    params: dict[str, Any] | None = None,
    kill_threshold: float | None = None,
    market: str = "cn",
) -> RebalanceSetup:
    """A RebalanceSetup from settings; `membership` is the store's point-in-time snapshots (None:
    none stored)."""
    frame = membership if membership is not None and len(membership) else None
    return RebalanceSetup(
        strategy,
        params,
        version,
        market_rules(settings, market),
        settings.market.reward_lambda,
        settings.market.reward_gamma,
        settings.ledger.kill_threshold if kill_threshold is None else kill_threshold,
        frame,
        settings.market.reward_terminal_penalty,
    )
