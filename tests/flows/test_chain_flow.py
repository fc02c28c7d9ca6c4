"""The daily chain on the bundled sample and a real Prefect test server: marks, reports, alerts,
named ends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from tests.flows.prefect_helpers import account_events

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One OOMRL_HOME holding the bundled sample for the module (each test uses its own
    accounts)."""
    from oomrl.data.sample import ensure_sample
    from oomrl.settings import get_settings

    folder = tmp_path_factory.mktemp("chain") / "home"
    ensure_sample(get_settings(store={"home": folder}))
    yield folder


def _open_on(home: Path, account: str, day: date) -> None:
    from flows.rebalance import weekly_rebalance

    assert weekly_rebalance(account=account, as_of=day, home=str(home))["committed"] is True


def _chain(home: Path, **kwargs: object) -> object:
    from flows.chain import daily_chain

    return daily_chain(ingest=False, home=str(home), return_state=True, **kwargs)


def test_marks_every_session_reports_and_asks_for_one_repair_per_cause(home: Path) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    ledger = Ledger(get_settings(store={"home": home}).ledger_url)
    _open_on(home, "chainacct", date(2026, 1, 30))
    state = _chain(home, as_of=date(2026, 2, 5))
    assert state.is_completed() and state.name == "Completed", state.message
    summary = state.result()
    nav = ledger.nav_frame("chainacct")
    assert [f"{d:%m-%d}" for d in nav["date"]] == [
        "01-30",
        "02-02",
        "02-03",
        "02-04",
        "02-05",
    ]  # a row per session
    # No trade
    assert len(ledger.fills_frame("chainacct")) == len(
        ledger.fills_frame("chainacct", date(2026, 1, 30))
    )
    assert summary["attribution"]["chainacct"]["html"].endswith("tearsheet.html")
    alerts = summary["diagnostics"]["chainacct"]
    assert {(a["as_of"], a["rule"]) for a in alerts} == {
        ("2026-02-02", "daily_loss"),
        ("2026-02-02", "turnover_spike"),
        ("2026-02-05", "daily_loss"),
    }
    assert [a["repair"] for a in alerts] == [
        "requested",
        "cooldown",
        "cooldown",
    ]  # one cause, one repair
    # the run's report draws and lists the alerts this very run raised (diagnostics run before it)
    listed = (Path(summary["attribution"]["chainacct"]["html"]).parent / "summary.md").read_text()
    for alert in alerts:
        assert f"| {alert['as_of']} | alert | {alert['severity']} {alert['rule']} |" in listed, (
            alert
        )
    events = account_events("oomrl.loss.alert", "chainacct")
    labels = {
        e.payload["alert_id"]: (e.resource["oomrl.alert.severity"], e.resource["oomrl.repair"])
        for e in events
    }
    assert labels[alerts[0]["alert_id"]] == ("warning", "requested")

    again = _chain(home, as_of=date(2026, 2, 5))  # the schedule fires again with nothing new
    assert again.is_completed() and again.name == "NoNewSession", again.name
    assert "nothing traded, nothing failed" in again.message
    later = _chain(home, as_of=date(2026, 2, 13))  # past the cooldown: the next cause asks again
    assert [a["repair"] for a in later.result()["diagnostics"]["chainacct"]] == ["requested"]
    holiday = _chain(home, as_of=date(2026, 2, 17))  # Spring Festival
    assert holiday.is_completed() and holiday.name == "NotASession"


def test_the_kill_switch_halts_on_the_marked_session_and_says_so(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    _open_on(home, "killacct", date(2026, 1, 30))
    # The 2 February loss takes the account past 8 %
    monkeypatch.setenv("OOMRL_KILL_THRESHOLD", "0.08")
    summary = _chain(home, as_of=date(2026, 2, 4)).result()
    (halt,) = summary["marking"]["halted"]
    assert halt["account"] == "killacct" and halt["halted_on"] == "2026-02-02"
    ledger = Ledger(get_settings(store={"home": home}).ledger_url)
    assert ledger.account("killacct").status.value == "halted"
    later = _chain(home, as_of=date(2026, 2, 5)).result()
    assert "killacct" not in [
        row["account"] for row in later["marking"]["accounts"]
    ]  # halted: marked no further
    assert ledger.nav_frame("killacct")["date"].max() == pd.Timestamp("2026-02-04")
    (event,) = account_events("oomrl.account.halted", "killacct")
    assert (
        event.payload["as_of"] == "2026-02-02"
        and "reached the kill-switch threshold 8%" in event.payload["reason"]
    )


def test_defaults_and_too_early_for_a_report(home: Path) -> None:
    from flows.attribution import attribution
    from flows.diagnostics import loss_diagnostics

    # The last session of the sample: the default as_of
    _open_on(home, "newacct", date(2026, 2, 27))
    early = attribution(account="newacct", home=str(home), return_state=True)
    assert early.is_completed() and early.name == "NotEnoughSessions", early.message
    assert "1 session(s) of NAV" in early.message
    # As_of: the last stored session
    assert loss_diagnostics(account="newacct", home=str(home)) is not None
    state = _chain(home)
    assert state.result()["as_of"] == "2026-02-27"


def test_an_account_that_cannot_be_marked_fails_the_run_by_name_and_the_others_are_marked(
    home: Path,
) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    ledger = Ledger(get_settings(store={"home": home}).ledger_url)
    _open_on(home, "goodacct", date(2026, 2, 24))
    ledger.open_account("ghost", 1_000_000)
    with ledger.engine.begin() as conn:  # a holding the market store knows nothing about
        conn.execute(
            ledger.t["positions"].insert().values(account="ghost", symbol="999999.SH", quantity=100)
        )
    try:
        state = _chain(home, as_of=date(2026, 2, 25))
        assert (
            state.is_failed()
            and "marking of ghost" in state.message
            and "999999.SH" in state.message
        )
        # The others: marked
        assert ledger.nav_frame("goodacct")["date"].max() == pd.Timestamp("2026-02-25")
    finally:
        ledger.halt("ghost", None, "test over")  # out of the other tests' chains
