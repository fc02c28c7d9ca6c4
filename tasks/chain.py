"""Tasks of the daily chain: its session, marking every active account, halts, its artifact."""

from __future__ import annotations

import json
from datetime import date
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from oomrl.settings import settings_for
from tasks.portfolio import emit_halted
from tasks.retry import unless_refused

if TYPE_CHECKING:
    from oomrl.portfolio.marking import MarkOutcome
    from oomrl.repair.chain import Marking

READ_RETRIES = 2  # reads of the store and ledger: a locked or briefly unreachable database passes


@task(
    name="last-stored-session",
    cache_policy=NO_CACHE,
    retries=READ_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def last_stored_session(home: str | None = None) -> date:
    """The last session with bars in the market store.

    A run without `as_of` is about it.
    """
    from oomrl.repair.chain import stored_as_of

    return stored_as_of(settings_for(home))


@task(
    name="mark-active-accounts",
    cache_policy=NO_CACHE,
    retries=READ_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def mark_accounts(as_of: date, home: str | None = None) -> Marking:
    """A NAV row per unmarked session for every active account, with no trades.

    The kill switch runs on each. The flow reads the model; `Marking.summary()` is its JSON.
    """
    from oomrl.repair.chain import mark_active_accounts

    return mark_active_accounts(settings_for(home), as_of)


def emit_halts(halted: list[MarkOutcome]) -> list[str | None]:
    """`oomrl.account.halted` for each account a mark just halted, dated the session it halted
    on."""
    return [
        emit_halted({**outcome.summary(), "as_of": str(outcome.halted_on), "reason": outcome.note})
        for outcome in halted
    ]


@task(
    name="nav-sessions",
    cache_policy=NO_CACHE,
    retries=READ_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=unless_refused,
)
def nav_sessions(account: str, home: str | None = None) -> int:
    """How many sessions of NAV the ledger holds for the account."""
    from oomrl.portfolio.service import open_ledger

    return len(open_ledger(settings_for(home)).nav_frame(account))


@task(name="publish-chain", cache_policy=NO_CACHE)
def publish_chain(summary: dict[str, Any]) -> None:
    """One markdown artifact saying what each stage of the day did."""
    lines = [
        f"# Daily chain on {summary.get('as_of')}",
        "",
        f"**{summary.get('outcome', '')}**",
        "",
    ]
    for stage in ("ingest", "shadow_books", "marking", "attribution", "diagnostics", "probations"):
        if stage in summary:
            text = json.dumps(summary[stage], indent=1, default=str)[:4000]
            lines.append(f"## {stage}\n\n```json\n{text}\n```\n")
    create_markdown_artifact(
        markdown="\n".join(lines),
        key="daily-chain",
        description=f"daily chain on {summary.get('as_of')}: {summary.get('outcome', '')}",
    )
