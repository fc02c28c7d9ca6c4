"""Loss diagnostics of one account: evaluate the rules, write new alerts' autopsies.

Each new alert's autopsy is written to the ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.diagnostics.critic import autopsy_for
from oomrl.diagnostics.rules import AlertConfig, evaluate, load_config
from oomrl.errors import DataValidationError
from oomrl.files import private_dir, private_file
from oomrl.settings import OomrlSettings


class AlertLedger(Protocol):
    """The part of the ledger diagnostics reads and writes."""

    def nav_frame(self, account: str) -> pd.DataFrame: ...

    def fills_frame(
        self, account: str, start: date | None = None, end: date | None = None
    ) -> pd.DataFrame: ...

    def insert_alert(
        self, account: str, alert_id: str, as_of: date, rule: str, payload: dict[str, Any]
    ) -> bool: ...

    def alerts(self, account: str) -> list[dict[str, Any]]: ...

    def active_strategy(self, account: str) -> tuple[str, str] | None: ...


def diagnose(
    ledger: AlertLedger,
    account: str,
    as_of: date | str,
    config: AlertConfig | None = None,
    *,
    benchmark: pd.Series | None = None,
    log_dir: Path | None = None,
    publish: Callable[[Autopsy], None] | None = None,
) -> list[Autopsy]:
    """Autopsies of the alerts first raised on as_of; alerts the ledger already holds are skipped.

    With `log_dir`, the fills behind each autopsy are written there as CSV. The CSV is named as its
    execution log. The autopsy is stored as the alert's payload, so the ledger keeps the full story.
    `publish` (e.g. emit an event) runs before the alert is stored. If it fails, the alert stays
    new and the next run raises it again. That is at-least-once; consumers de-duplicate by alert_id.
    """
    config = config or AlertConfig()
    nav, fills = ledger.nav_frame(account), ledger.fills_frame(account)
    from oomrl.portfolio.service import DEFAULT_STRATEGY

    active = ledger.active_strategy(account)
    module = f"strategies.{active[1] if active else DEFAULT_STRATEGY}"  # what the account trades
    known = {row["alert_id"] for row in ledger.alerts(account)}
    new: list[Autopsy] = []
    # Most severe first. When several alerts share a cause, the worst asks for the repair.
    raised = sorted(
        evaluate(nav, fills, config, as_of, account, benchmark),
        key=lambda a: a.severity != "critical",
    )
    for alert in raised:
        if alert.alert_id in known:
            continue
        log = None
        if log_dir is not None:
            # To_csv keeps the 0600
            log = private_file(private_dir(log_dir) / f"fills-{alert.alert_id}.csv")
            dated = fills.assign(date=pd.to_datetime(fills["date"]))
            dated[dated["date"] <= pd.Timestamp(alert.as_of)].to_csv(log, index=False)
        autopsy = autopsy_for(
            alert,
            nav,
            fills,
            config,
            module=module,
            fallback_version=active[0] if active else None,
            execution_log=str(log) if log else None,
            benchmark=benchmark,
        )
        if publish is not None:
            publish(autopsy)
        if ledger.insert_alert(
            account, alert.alert_id, alert.as_of, alert.rule, autopsy.model_dump(mode="json")
        ):
            new.append(autopsy)
    return new


def diagnose_account(
    settings: OomrlSettings,
    account: str,
    as_of: str,
    config_path: Path | None = None,
    publish: Callable[[Autopsy], None] | None = None,
    start: str | None = None,
) -> list[Autopsy]:
    """The CLI edge: ledger and CSI 300 from the settings, thresholds from an optional file.

    With `start`, every NAV session from `start` to `as_of` is diagnosed in turn. A chain may catch
    up on several newly marked sessions. It raises each alert on the day it first held.
    """
    from oomrl.data.sample import ensure_sample
    from oomrl.metrics.attribution import benchmark_returns
    from oomrl.portfolio.ledger import Ledger

    for value in (as_of, start):
        try:
            pd.Timestamp(value)
        except ValueError as exc:
            raise DataValidationError(f"--as-of {value!r} is not a date (use YYYY-MM-DD)") from exc
    config = load_config(config_path)
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    benchmark = benchmark_returns(ensure_sample(settings), "price")
    days = [pd.Timestamp(as_of)]
    if start is not None:
        dates = pd.to_datetime(ledger.nav_frame(account)["date"])
        days = [d for d in dates if pd.Timestamp(start) <= d <= pd.Timestamp(as_of)] or days
    found: list[Autopsy] = []
    for day in days:
        stamp = day.date().isoformat()
        found += diagnose(
            ledger,
            account,
            stamp,
            config,
            benchmark=benchmark,
            log_dir=settings.store.runs_dir / f"diagnose-{account}-{stamp}",
            publish=publish,
        )
    return found
