"""Prefect tasks of the portfolio: resolve the strategy version, rebalance, replay, artifacts, events."""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import runtime, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.events import emit_event

from oomrl.config import Settings, get_settings
from oomrl.portfolio.killswitch import HALTED_EVENT
from tasks.retry import unless_refused

REBALANCE_RETRIES = 2  # safe: a rebalance commits at most once per (account, date)
SHOWN_NAV_ROWS = 10


def _settings(home: str | None) -> Settings:
    return get_settings(**({"home": home} if home else {}))


@task(name="resolve-strategy-version", cache_policy=NO_CACHE)
def resolve_version(account: str, home: str | None = None) -> dict[str, str]:
    """The account's active strategy name and version (git SHA, or "builtin")."""
    from oomrl.portfolio.service import open_ledger, resolve_strategy

    settings = _settings(home)
    resolved = resolve_strategy(settings, open_ledger(settings), account)
    return {"name": resolved.name, "version": resolved.version}


@task(name="tag-run-with-strategy-version", cache_policy=NO_CACHE)
def tag_run(name: str, version: str) -> list[str]:
    """Tag the current flow run with the strategy and its version, and set the run's version."""
    tags = sorted(set(runtime.flow_run.tags or []) | {f"strategy:{name}", f"strategy-version:{version[:12]}"})
    with get_client(sync_client=True) as client:
        client.update_flow_run(runtime.flow_run.id, flow_version=version, tags=tags)
    return tags


@task(name="rebalance-account", retries=REBALANCE_RETRIES, retry_delay_seconds=5,
      retry_condition_fn=unless_refused, cache_policy=NO_CACHE)
def rebalance_account(account: str, as_of: date, dry_run: bool = False,
                      home: str | None = None) -> dict[str, Any]:
    """Run the domain rebalance (one transaction) and return its summary, orders, fills and NAV rows."""
    from oomrl.portfolio.service import run_rebalance

    outcome = run_rebalance(_settings(home), account, as_of, dry_run=dry_run)
    return {"summary": outcome.summary(), "orders": outcome.orders.to_dict("records"),
            "fills": outcome.fills.drop(columns=["cash_delta_fen"], errors="ignore").to_dict("records"),
            "nav": outcome.nav.to_dict("records")}


@task(name="publish-rebalance-artifacts", cache_policy=NO_CACHE)
def publish_rebalance_artifacts(result: dict[str, Any], home: str | None = None) -> None:
    """Orders and fills as table artifacts; the account's recent NAV as a markdown artifact."""
    from oomrl.portfolio.service import open_ledger

    summary = result["summary"]
    key = f"rebalance-{summary['account']}".lower().replace("_", "-")
    create_table_artifact(table=_jsonable(result["orders"]) or [{"orders": "none"}], key=f"{key}-orders",
                          description=f"orders of {summary['account']} on {summary['as_of']}")
    create_table_artifact(table=_jsonable(result["fills"]) or [{"fills": "none"}], key=f"{key}-fills",
                          description=f"fills of {summary['account']} on {summary['as_of']}")
    nav = open_ledger(_settings(home)).nav_frame(summary["account"]).tail(SHOWN_NAV_ROWS)
    lines = [f"# {summary['account']} on {summary['as_of']}", "",
             (f"strategy version `{summary['strategy_version']}`; committed={summary['committed']}, "
              f"duplicate={summary['duplicate']}, halted={summary['halted']}"), "",
             "| date | NAV | realized | frictionless | leakage | turnover | costs | principal loss |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [(f"| {r.date:%Y-%m-%d} | {r.nav:,.2f} | {r.realized_return:.4%} "
               f"| {r.frictionless_return:.4%} | {r.slippage_leakage:.4%} | {r.turnover:.3f} "
               f"| {r.costs:,.2f} | {r.principal_loss:.2%} |") for r in nav.itertuples()]
    create_markdown_artifact(markdown="\n".join(lines), key=f"{key}-nav",
                             description="NAV, sim-to-real gap and principal loss")


@task(name="emit-account-halted", cache_policy=NO_CACHE)
def emit_halted(summary: dict[str, Any]) -> str | None:
    """Emit `oomrl.account.halted` for an account the kill switch just halted."""
    event = emit_event(event=HALTED_EVENT,
                       resource={"prefect.resource.id": f"oomrl.account.{summary['account']}",
                                 "prefect.resource.name": summary["account"]},
                       payload={k: summary[k] for k in ("as_of", "principal_loss", "nav",
                                                        "strategy_version")})
    return str(event.id) if event else None


@task(name="replay-strategy", retries=1, retry_delay_seconds=5, retry_condition_fn=unless_refused,
      cache_policy=NO_CACHE)
def replay_strategy(strategy: str, start: date, end: date, params: dict[str, Any] | None = None,
                    workspace: str | None = None, home: str | None = None) -> dict[str, Any]:
    """Replay one strategy on the stored data; returns its summary (turnover, costs, leakage, net)."""
    from pathlib import Path

    from oomrl.portfolio.service import run_replay

    result = run_replay(_settings(home), strategy, start, end, params,
                        Path(workspace) if workspace else None)
    return {k: (str(v) if isinstance(v, date) else v) for k, v in result.summary().items()}


@task(name="publish-replay-artifact", cache_policy=NO_CACHE)
def publish_replay_artifact(summaries: list[dict[str, Any]]) -> None:
    """The replay comparison as a table artifact."""
    create_table_artifact(table=_jsonable(summaries), key="replay-summary",
                          description="turnover, total costs, slippage leakage and net return")


def _jsonable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
             for k, v in row.items()} for row in rows]
