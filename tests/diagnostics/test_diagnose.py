"""diagnose() on the real ledger (SQLite, and PostgreSQL when configured): stores each alert
once."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from oomrl.diagnostics.autopsy import SCHEMA_PATH
from oomrl.diagnostics.diagnose import diagnose
from oomrl.portfolio.ledger import Ledger
from tests.diagnostics.conftest import book_history, fills_frame, nav_frame, quiet_returns
from tests.portfolio.conftest import ledger  # noqa: F401  (the shared SQLite/PostgreSQL fixture)


def test_diagnose_stores_new_alerts_once(ledger: Ledger, tmp_path: Path) -> None:  # noqa: F811
    nav = nav_frame(list(quiet_returns(30)) + [-0.035], leakage=0.0008, turnover=0.4)
    fills = fills_frame(nav["date"].iloc[-10:], participation=0.12, impact=5000.0)
    book_history(ledger, "acct-1", nav, fills)
    as_of = nav["date"].iloc[-1].date().isoformat()

    first = diagnose(ledger, "acct-1", as_of, log_dir=tmp_path / "logs")
    rules = sorted(a.trigger.rule for a in first)
    assert rules == ["daily_loss", "execution_decay", "turnover_spike"]
    stored = ledger.alerts("acct-1")
    assert sorted(row["alert_id"] for row in stored) == sorted(a.alert_id for a in first)
    schema = json.loads(SCHEMA_PATH.read_text())
    for row in stored:
        jsonschema.validate(row["payload"], schema)
        assert row["payload"]["diagnostics"]["module"] == "strategies.daily_momentum"
    log = Path(first[0].diagnostics.execution_log or "")
    assert log.exists() and len(pd.read_csv(log)) == 10

    assert diagnose(ledger, "acct-1", as_of) == []  # the same alerts are never raised twice
    assert len(ledger.alerts("acct-1")) == 3


def test_a_failed_publish_leaves_the_alert_new(ledger: Ledger) -> None:  # noqa: F811
    nav = nav_frame(list(quiet_returns(30)) + [-0.035])
    book_history(ledger, "acct-2", nav, fills_frame(nav["date"].iloc[-2:]))
    as_of = nav["date"].iloc[-1].date()
    sent: list[str] = []

    def broken(autopsy: object) -> None:
        raise ConnectionError("event bus down")

    with pytest.raises(ConnectionError, match="event bus down"):
        diagnose(ledger, "acct-2", as_of, publish=broken)
    assert ledger.alerts("acct-2") == []  # nothing stored, so the next run raises it again
    again = diagnose(ledger, "acct-2", as_of, publish=lambda a: sent.append(a.alert_id))
    assert [a.alert_id for a in again] == sent and len(sent) == 1
    assert diagnose(ledger, "acct-2", as_of, publish=lambda a: sent.append(a.alert_id)) == []
    assert len(sent) == 1


def test_an_alert_stored_by_a_concurrent_run_is_not_returned(ledger: Ledger) -> None:  # noqa: F811
    nav = nav_frame(list(quiet_returns(30)) + [-0.035])
    book_history(ledger, "acct-3", nav, fills_frame(nav["date"].iloc[-2:]))
    as_of = nav["date"].iloc[-1].date()
    assert len(diagnose(ledger, "acct-3", as_of)) == 1

    class StaleRead(Ledger):
        """A run that read the alert list before another run stored its alert."""

        def alerts(self, account: str) -> list[dict[str, object]]:
            return []

    stale = StaleRead(ledger.url, schema=ledger.metadata.schema)
    assert diagnose(stale, "acct-3", as_of) == []  # insert_alert said "exists": not new
