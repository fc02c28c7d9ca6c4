"""The portfolio: the ledger, the broker, rebalancing and replay, strategies reached through
hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.portfolio.actions import apply_actions
    from oomrl.portfolio.audit import audit_fills
    from oomrl.portfolio.book import Membership
    from oomrl.portfolio.broker import Execution, PaperBroker, Unfilled, session_tables
    from oomrl.portfolio.budget_tables import NANO, cost_of_alignment, read_cost_of_alignment
    from oomrl.portfolio.hosting import (
        UNSAFE_JAIL,
        HostedRunner,
        SharedMarket,
        StrategyRunner,
        WorkspaceStrategy,
        jail_lock,
        weights_array,
    )
    from oomrl.portfolio.killswitch import AccountStatus, KillSwitch, require_active
    from oomrl.portfolio.ledger import AlertRow, Ledger, RebalanceRecord
    from oomrl.portfolio.ledger_tables import NAV_COLUMNS, NAV_FIELDS, create_tables
    from oomrl.portfolio.market import (
        ColumnWindows,
        MarketFrames,
        panels_from_bars,
        rolling_by_column,
        to_tick,
    )
    from oomrl.portfolio.marking import (
        MarkOutcome,
        active_accounts,
        holding_version,
        last_stored_session,
        mark_account,
        marked_through,
        run_marking,
    )
    from oomrl.portfolio.probes import (
        MEMORIZED,
        MONTHS,
        ProbeResult,
        family,
        relabelled,
        run_probes,
        seed_of,
        shifted,
    )
    from oomrl.portfolio.rebalance import (
        HISTORY_DAYS,
        RebalanceOutcome,
        advance,
        load_panels,
        session_index,
    )
    from oomrl.portfolio.recompute import (
        FRESH_DECISIONS,
        Difference,
        Recomputed,
        evenly_spread,
        recompute_fresh,
    )
    from oomrl.portfolio.replay import ReplayResult, replay_setup
    from oomrl.portfolio.reward import (
        DEFAULT_GAMMA,
        REFERENCE_ADV,
        REFERENCE_NAMES,
        REFERENCE_NAV,
        REFERENCE_SIGMA,
        calibrated_gamma,
        execution_penalty,
        frictionless_return,
        principal_loss,
        step_reward,
        terminal,
    )
    from oomrl.portfolio.service import (
        DEFAULT_STRATEGY,
        ResolvedStrategy,
        bundled_strategy,
        existing_ledger,
        last_session,
        membership,
        open_ledger,
        parse_params,
        run_replay,
    )
    from oomrl.portfolio.setup import RebalanceSetup, market_rules, rebalance_setup

__all__ = [
    "DEFAULT_GAMMA",
    "DEFAULT_STRATEGY",
    "FRESH_DECISIONS",
    "HISTORY_DAYS",
    "MEMORIZED",
    "MONTHS",
    "NANO",
    "NAV_COLUMNS",
    "NAV_FIELDS",
    "REFERENCE_ADV",
    "REFERENCE_NAMES",
    "REFERENCE_NAV",
    "REFERENCE_SIGMA",
    "UNSAFE_JAIL",
    "AccountStatus",
    "AlertRow",
    "ColumnWindows",
    "Difference",
    "Execution",
    "HostedRunner",
    "KillSwitch",
    "Ledger",
    "MarkOutcome",
    "MarketFrames",
    "Membership",
    "PaperBroker",
    "ProbeResult",
    "RebalanceOutcome",
    "RebalanceRecord",
    "RebalanceSetup",
    "Recomputed",
    "ReplayResult",
    "ResolvedStrategy",
    "SharedMarket",
    "StrategyRunner",
    "Unfilled",
    "WorkspaceStrategy",
    "active_accounts",
    "advance",
    "apply_actions",
    "audit_fills",
    "bundled_strategy",
    "calibrated_gamma",
    "cost_of_alignment",
    "create_tables",
    "evenly_spread",
    "execution_penalty",
    "existing_ledger",
    "family",
    "frictionless_return",
    "holding_version",
    "jail_lock",
    "last_session",
    "last_stored_session",
    "load_panels",
    "mark_account",
    "marked_through",
    "market_rules",
    "membership",
    "open_ledger",
    "panels_from_bars",
    "parse_params",
    "principal_loss",
    "read_cost_of_alignment",
    "rebalance_setup",
    "recompute_fresh",
    "relabelled",
    "replay_setup",
    "require_active",
    "rolling_by_column",
    "run_marking",
    "run_probes",
    "run_replay",
    "seed_of",
    "session_index",
    "session_tables",
    "shifted",
    "step_reward",
    "terminal",
    "to_tick",
    "weights_array",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)
