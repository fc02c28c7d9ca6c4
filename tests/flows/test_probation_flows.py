"""The probation on the Prefect harness: the daily chain trades, marks and decides it with an event
and an artifact; the probation-review flow pauses with the evidence and decides on a person's
answer."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import on_probation, repair_home, sample_data  # noqa: F401
from tests.agent.probation_book import SESSIONS, chain_day, champion_trades, forward
from tests.flows.prefect_helpers import account_events, paused_run, read_artifact

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_the_daily_chain_trades_marks_and_decides_a_probation(
    on_probation: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.chain import daily_chain

    # The decision's direction is not what is tested
    monkeypatch.setenv("OOMRL_AGENT_PROMOTION_MARGIN", "5.0")
    settings, ledger, v2 = on_probation["settings"], on_probation["ledger"], on_probation["v2"]
    days = forward(SESSIONS)
    for day in days[
        :-1
    ]:  # the first forward sessions as the chain's steps, without the flow's reports
        champion_trades(settings, ledger, day, day)
        chain_day(settings, day)
    champion_trades(settings, ledger, days[-1], days[-1])
    summary = daily_chain(as_of=days[-1], ingest=False)
    assert isinstance(summary, dict), summary
    assert summary["shadow_books"] == {
        "paper~v2": 0
    }  # weekly: it traded on the first forward session only
    assert "paper~v2" in summary["marking"]["marked"] and "paper~v2" not in summary["diagnostics"]
    (decided,) = summary["probations"]["decided"]
    assert (decided["version"], decided["status"], decided["decided_by"]) == (
        "v2",
        "promoted",
        "the daily chain",
    )
    assert "1 probation(s) decided" in summary["outcome"]
    assert ledger.active_version("paper") == v2.sha
    (event,) = account_events(
        "oomrl.strategy.promoted", "paper", where=lambda e: e.payload["sha"] == v2.sha
    )
    assert event.payload["probation"]["sessions"] == SESSIONS
    shown = str(read_artifact("probation-paper-v2"))
    assert f"{SESSIONS} of {SESSIONS} (0 left)" in shown and "| champion | challenger |" in shown


def test_a_person_retires_a_challenger_from_the_review_form(on_probation: dict[str, Any]) -> None:  # noqa: F811
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run
    from prefect.input.actions import read_flow_run_input

    from flows.probation import probation_review

    settings, ledger = on_probation["settings"], on_probation["ledger"]
    for day in forward(2):
        chain_day(settings, day)
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.update(probation_review(timeout_s=120)), daemon=True
    )
    thread.start()  # on its defaults: the default account and its one challenger
    paused = paused_run("probation-review")
    keyset = paused.state.state_details.run_input_keyset
    with get_client(sync_client=True):
        form = read_flow_run_input(keyset["description"], flow_run_id=paused.id)
    # The evidence is on the form
    assert "Probation of v2 on paper" in form and "2 of 5 (3 left)" in form
    resume_flow_run(
        paused.id, run_input={"decision": "retire", "reason": "drawdown too deep for us"}
    )
    thread.join(120)
    assert box["status"] == "retired" and box["reason"] == "drawdown too deep for us"
    assert box["decided_by"] == "a person in the Prefect UI (probation-review)" and box["autopsy"]
    assert ledger.active_version("paper") == on_probation["v1"]
    (event,) = account_events(
        "oomrl.strategy.retired",
        "paper",
        where=lambda e: e.payload["sha"] == on_probation["v2"].sha,
    )
    assert event.payload["autopsy"]["trigger"]["rule"] == "probation_retired"


def test_a_review_of_an_account_without_a_challenger_is_refused_and_changes_nothing(
    repair_home: Path,  # noqa: F811
) -> None:
    from flows.probation import probation_review

    state = probation_review(account="paper", return_state=True)
    assert state.is_completed() and state.name == "Refused"
    assert "is not on probation on account 'paper' (on probation: none)" in (state.message or "")
