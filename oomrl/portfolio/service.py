"""Wiring for the CLI and flows: settings -> ledger, store, the bundled strategies, replay.

An account's strategy version and its rebalance read git, so they stand above the versions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, cast

import pandas as pd

from oomrl.errors import OomrlError
from oomrl.market import calendar
from oomrl.portfolio.hosting import WorkspaceStrategy
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.rebalance import HISTORY_DAYS, load_panels
from oomrl.portfolio.replay import ReplayResult, replay_setup
from oomrl.portfolio.setup import rebalance_setup
from oomrl.settings import OomrlSettings

DEFAULT_STRATEGY = "daily_momentum"  # the Phase-1 baseline every fresh account starts with


@dataclass(frozen=True)
class ResolvedStrategy:
    """The strategy an account trades and where it came from (run in a strategy host)."""

    strategy: WorkspaceStrategy
    name: str
    version: str  # git SHA of the workspace commit, or "builtin"


def bundled_strategy(settings: OomrlSettings, name: str) -> WorkspaceStrategy:
    """A strategy of the bundled strategies/ (this installation's). It runs in a host like any
    version."""
    from oomrl.checkout import repo_root

    return WorkspaceStrategy(repo_root(), name, settings.runtime.unsafe_no_jail)


def open_ledger(settings: OomrlSettings) -> Ledger:
    """The ledger of `settings` with its tables created."""
    settings.store.ensure_dirs()
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    return ledger


def existing_ledger(settings: OomrlSettings) -> Ledger | None:
    """The ledger for reading, or None when none was ever created. A read command never creates
    one."""
    import sqlalchemy as sa

    from oomrl.files import sqlite_file

    database = sqlite_file(settings.ledger_url)
    if database is not None and not database.is_file():
        return None
    ledger = Ledger(settings.ledger_url)
    return (
        ledger
        if sa.inspect(ledger.engine).has_table("accounts", schema=ledger.metadata.schema)
        else None
    )


def parse_params(params: str | dict[str, Any] | None) -> dict[str, Any]:
    """Strategy parameters from a JSON string or dict.

    The strategy's Params model checks them in its host."""
    if isinstance(params, str):
        try:
            params = json.loads(params) if params.strip() else {}
        except json.JSONDecodeError as exc:
            raise OomrlError(f"--params is not valid JSON: {exc}") from exc
    if params is not None and not isinstance(params, dict):
        raise OomrlError("--params must be a JSON object")
    return dict(params or {})


def membership(store: Any) -> pd.DataFrame | None:
    """Point-in-time index membership from the store, or None when it holds none."""
    reader = getattr(store, "read_membership", None)
    frame = reader() if reader else None
    return frame if frame is not None and len(frame) else None


def last_session(on_or_before: date | None = None) -> date:
    """The latest XSHG session on or before a date (today by default)."""
    day = pd.Timestamp(on_or_before or date.today())
    found = calendar.sessions(day - timedelta(days=20), day)
    if not len(found):
        raise OomrlError(f"no XSHG session on or before {day.date()}")
    return cast(date, found[-1].date())


def within_store(store: Any, start: date) -> None:
    """A replay starting after the store's last session is refused, naming the span the store holds.

    The panels' own error would name only the end of the requested window."""
    summary = store.bar_summary() if hasattr(store, "bar_summary") else {}
    first, last = summary.get("first_date"), summary.get("last_date")
    if last is not None and pd.Timestamp(start) > last:
        raise OomrlError(
            f"start {start} is after the last session in the market store: it holds "
            f"{first:%Y-%m-%d}..{last:%Y-%m-%d} (ingest more, or start inside it)"
        )


def run_replay(
    settings: OomrlSettings,
    strategy_name: str,
    start: date,
    end: date,
    params: str | dict[str, Any] | None = None,
    workspace: Path | None = None,
    store: Any = None,
    kill_threshold: float | None = None,
    market: str = "cn",
) -> ReplayResult:
    """Replay a strategy (bundled, or from a workspace directory) on the stored data of one
    market."""
    if not strategy_name.isidentifier():
        raise OomrlError(
            f"strategy names are identifiers (strategies/<name>.py), got {strategy_name!r}"
        )
    source = (
        WorkspaceStrategy(workspace, strategy_name, settings.runtime.unsafe_no_jail)
        if workspace is not None
        else bundled_strategy(settings, strategy_name)
    )
    if store is None:
        from oomrl.data.sample import ensure_sample

        store = ensure_sample(settings)
    within_store(store, start)
    panels = load_panels(
        store,
        end,
        history_days=(pd.Timestamp(end) - pd.Timestamp(start)).days + HISTORY_DAYS,
        market=market,
    )
    setup = rebalance_setup(
        source,
        "replay",
        settings,
        membership(store) if market == "cn" else None,
        params=parse_params(params),
        kill_threshold=kill_threshold,
        market=market,
    )
    return replay_setup(setup, panels, start, end, settings.ledger.initial_cash)
