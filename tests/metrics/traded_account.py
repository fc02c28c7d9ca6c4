"""A real traded account for report tests: the bundled sample, the paper broker, two strategy
versions (v1 trading daily, a promoted v2 trading weekly), the loss diagnostics' alerts, one repair
folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pandas as pd

from oomrl.diagnostics.diagnose import diagnose
from oomrl.market import calendar
from oomrl.market.rules import AShareRules
from oomrl.metrics.attribution import benchmark_returns
from oomrl.portfolio.ledger import Ledger
from oomrl.portfolio.rebalance import HISTORY_DAYS, RebalanceSetup, load_panels, rebalance
from oomrl.repair import promotion
from oomrl.repair.versions import StrategyVersions
from oomrl.settings import OomrlSettings, get_settings
from tests.portfolio.inprocess import InProcessStrategy

ACCOUNT = "quant"
START, SWITCH, END = date(2025, 1, 2), date(2025, 2, 17), date(2025, 5, 30)


@dataclass
class TradedAccount:
    """Where everything is, and the two versions' SHAs."""

    settings: OomrlSettings
    ledger: Ledger
    store: object
    v1: str
    v2: str


def _promote_v2(versions: StrategyVersions, scratch: Path) -> str:
    """A real promotion: a commit on a clone of the workspace, tagged v2, with repair metadata."""
    candidate = versions.clone_to(scratch / "candidate")
    readme = candidate / "strategies" / "REPAIRED.md"
    readme.write_text("weekly rebalancing after the friction alert\n")
    info = promotion.promote(
        versions,
        candidate,
        "Repair daily_momentum: trade weekly",
        {"autopsy": {"alert_id": "test", "as_of": str(SWITCH)}},
        ACCOUNT,
        "daily_momentum",
    )
    return info.sha


def _write_repair_folder(runs_dir: Path, as_of: date, status: str, tag: str | None) -> None:
    """The two files a repair run leaves that the report reads (autopsy.json, outcome.json)."""
    folder = runs_dir / f"repair-{as_of:%Y%m%d}T000000Z-{status[:6]}"
    folder.mkdir(parents=True)
    (folder / "autopsy.json").write_text(json.dumps({"account": ACCOUNT, "as_of": str(as_of)}))
    (folder / "outcome.json").write_text(
        json.dumps({"status": status, "version": {"tag": tag} if tag else None})
    )


def build_traded_account(root: Path) -> TradedAccount:
    """Trade v1 daily until SWITCH, then v2 on each week's first session until END; diagnose
    weekly."""
    from oomrl.data.sample import ensure_sample

    settings = get_settings(store={"home": root}, ledger={"url": f"sqlite:///{root / 'ledger.db'}"})
    settings.store.ensure_dirs()
    store = ensure_sample(settings)
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    ledger.open_account(ACCOUNT, 10_000_000.0)
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    versions.init()
    v1 = versions.resolve("v1")
    versions.activate("v1", ACCOUNT, "daily_momentum")
    panels = load_panels(store, END, history_days=(END - START).days + HISTORY_DAYS)
    benchmark = benchmark_returns(store)
    strategy = InProcessStrategy.bundled("daily_momentum")
    sessions = [s.date() for s in calendar.sessions(pd.Timestamp(START), pd.Timestamp(END))]
    v2 = ""
    week: tuple[int, int] | None = None
    for day in sessions:
        if day >= SWITCH and not v2:
            v2 = _promote_v2(versions, root)
        new_week = calendar.week_key(pd.Timestamp(day)) != week
        week = calendar.week_key(pd.Timestamp(day))
        if v2 and not new_week and day != sessions[-1]:
            continue
        setup = RebalanceSetup(strategy, {}, v2 or v1, AShareRules())
        rebalance(ledger, ACCOUNT, day, panels, setup)
        diagnose(ledger, ACCOUNT, day, benchmark=benchmark)
    _write_repair_folder(settings.store.runs_dir, SWITCH, "promoted", "v2")
    _write_repair_folder(settings.store.runs_dir, date(2025, 4, 7), "failed", None)
    return TradedAccount(settings, ledger, store, v1, v2)
