"""Prefect tasks of the portfolio: resolve the strategy version, rebalance, replay, artifacts,
events."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event

from oomrl.artifacts import fills_rows, nav_markdown, orders_rows, replay_rows
from oomrl.events import HALTED_EVENT, account_resource
from oomrl.run_tags import TradedVersion, strategy_tags
from oomrl.settings import settings_for
from tasks.retry import unless_refused
from tasks.run_tags import add_run_tags

if TYPE_CHECKING:
    from oomrl.portfolio.rebalance import RebalanceOutcome

REBALANCE_RETRIES = 2  # safe: a rebalance commits at most once per (account, date)
SHOWN_NAV_ROWS = 10


@task(name="resolve-strategy-version", cache_policy=NO_CACHE)
def resolve_version(account: str, home: str | None = None, dry_run: bool = False) -> TradedVersion:
    """The account's active strategy, its version (git SHA) and label ("v1 daily_momentum").

    An account without one starts on v1. A dry run is the exception: it changes nothing.
    """
    from oomrl.portfolio.service import DEFAULT_STRATEGY, open_ledger
    from oomrl.repair.trading import resolve_strategy
    from oomrl.repair.versions import StrategyVersions, start_on_v1

    settings = settings_for(home)
    ledger = open_ledger(settings)
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    if not dry_run:
        start_on_v1(versions, account, DEFAULT_STRATEGY)
    resolved = resolve_strategy(settings, ledger, account)
    label = versions.labels(ledger.version_names(account)).get(
        resolved.version, resolved.version[:12]
    )
    return TradedVersion(name=resolved.name, version=resolved.version, label=label)


@task(name="tag-run-with-strategy-version", cache_policy=NO_CACHE)
def tag_run(name: str, label: str) -> list[str]:
    """Tag the current flow run with the strategy and its version by name
    (`strategy-version:v1`)."""
    return add_run_tags.fn(strategy_tags(name, label))


@task(
    name="rebalance-account",
    retries=REBALANCE_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
    cache_policy=NO_CACHE,
)
def rebalance_account(
    account: str, as_of: date, dry_run: bool = False, home: str | None = None
) -> RebalanceOutcome:
    """Run the domain rebalance (one transaction); the flow reads the outcome by attribute."""
    from oomrl.repair.trading import run_rebalance

    return run_rebalance(settings_for(home), account, as_of, dry_run=dry_run)


@task(name="publish-rebalance-artifacts", cache_policy=NO_CACHE)
def publish_rebalance_artifacts(
    outcome: RebalanceOutcome, home: str | None = None, version_label: str | None = None
) -> None:
    """Orders and fills as table artifacts (rounded, units in the headers).

    The recent NAV goes as markdown. The rows are made here, at the artifact.
    """
    from oomrl.portfolio.service import open_ledger

    account, as_of = outcome.account, outcome.as_of
    key = f"rebalance-{account}".lower().replace("_", "-")
    fills = outcome.fills.drop(columns=["cash_delta_fen"], errors="ignore")
    create_table_artifact(
        table=orders_rows(outcome.orders.to_dict("records")) or [{"orders": "none"}],
        key=f"{key}-orders",
        description=f"orders of {account} on {as_of}",
    )
    create_table_artifact(
        table=fills_rows(fills.to_dict("records")) or [{"fills": "none"}],
        key=f"{key}-fills",
        description=f"fills of {account} on {as_of}",
    )
    nav = open_ledger(settings_for(home)).nav_frame(account).tail(SHOWN_NAV_ROWS)
    label = version_label or outcome.strategy_version[:12]
    create_markdown_artifact(
        markdown=nav_markdown(outcome.summary(), nav, label),
        key=f"{key}-nav",
        description="NAV, sim-to-real gap and principal loss",
    )


@task(name="emit-account-halted", cache_policy=NO_CACHE)
def emit_halted(summary: dict[str, Any]) -> str | None:
    """Emit `oomrl.account.halted` for an account the kill switch just halted."""
    event = emit_event(
        event=HALTED_EVENT,
        resource=account_resource(summary["account"]),
        payload={
            k: summary[k]
            for k in ("as_of", "principal_loss", "nav", "strategy_version", "reason")
            if k in summary
        },
    )
    return str(event.id) if event else None


@task(
    name="replay-strategy",
    retries=1,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
    cache_policy=NO_CACHE,
)
def replay_strategy(
    strategy: str,
    start: date,
    end: date,
    params: dict[str, Any] | None = None,
    workspace: str | None = None,
    home: str | None = None,
) -> dict[str, Any]:
    """Replay one strategy on the stored data; returns its summary (turnover, costs, leakage,
    net)."""
    from pathlib import Path

    from oomrl.portfolio.service import run_replay

    result = run_replay(
        settings_for(home), strategy, start, end, params, Path(workspace) if workspace else None
    )
    return {k: (str(v) if isinstance(v, date) else v) for k, v in result.summary().items()}


@task(name="publish-replay-artifact", cache_policy=NO_CACHE)
def publish_replay_artifact(summaries: list[dict[str, Any]]) -> None:
    """The replay comparison as a table artifact."""
    create_table_artifact(
        table=replay_rows(summaries),
        key="replay-summary",
        description="turnover, total costs, slippage leakage and net return",
    )
