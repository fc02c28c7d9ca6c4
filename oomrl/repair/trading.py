"""An account's strategy version at work: the version it trades, and one rebalance with it.

This wiring reads the workspace's versions (git), so it stands above `versions`, not in
portfolio/.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from oomrl.portfolio.hosting import WorkspaceStrategy
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.rebalance import RebalanceOutcome, load_panels, rebalance
from oomrl.portfolio.service import (
    DEFAULT_STRATEGY,
    ResolvedStrategy,
    bundled_strategy,
    membership,
    open_ledger,
)
from oomrl.portfolio.setup import rebalance_setup
from oomrl.settings import OomrlSettings


def resolve_strategy(
    settings: OomrlSettings, ledger: Ledger, account: str, default: str = DEFAULT_STRATEGY
) -> ResolvedStrategy:
    """The account's active version (its workspace commit's folder), else the bundled strategy."""
    active = ledger.active_strategy(account)
    if active is None:
        return ResolvedStrategy(bundled_strategy(settings, default), default, "builtin")
    sha, name = active
    from oomrl.repair.versions import (
        StrategyVersions,  # versions needs git; imported only when used
    )

    root = StrategyVersions(settings.store.workspace_dir).materialize(sha)
    return ResolvedStrategy(
        WorkspaceStrategy(root, name, settings.runtime.unsafe_no_jail), name, sha
    )


def run_rebalance(
    settings: OomrlSettings, account: str, as_of: date, dry_run: bool = False, store: Any = None
) -> RebalanceOutcome:
    """One rebalance of `account` on `as_of` with its active strategy version and the stored
    data."""
    ledger = open_ledger(settings)
    ledger.open_account(account, settings.ledger.initial_cash)
    if not dry_run:  # every booked trade names a version: a fresh account starts on v1
        from oomrl.repair.versions import StrategyVersions, start_on_v1

        start_on_v1(
            StrategyVersions(settings.store.workspace_dir, ledger), account, DEFAULT_STRATEGY
        )
    resolved = resolve_strategy(settings, ledger, account)
    if store is None:
        from oomrl.data.sample import ensure_sample

        store = ensure_sample(settings)
    panels = load_panels(store, as_of)
    setup = rebalance_setup(resolved.strategy, resolved.version, settings, membership(store))
    return rebalance(ledger, account, as_of, panels, setup, dry_run=dry_run)
