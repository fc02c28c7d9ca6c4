"""The loop as a new user runs it on `oomrl server up` with the bundled data: every deployment on
its defaults, and the daily chain marking NAV and raising an alert that starts exactly one
repair."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e
ACCOUNT = "chain-e2e"
# The chain then marks 12, 13 and 24..27 February (Spring Festival between)
OPENED_ON = "2026-02-11"
LAST_SESSION = "2026-02-27"  # the bundled sample's last session: every default as_of


def _completed(
    stack: Stack, deployment: str, parameters: dict[str, Any], timeout_s: float = 420
) -> dict[str, Any]:
    run = stack.wait_for(stack.run_deployment(deployment, parameters), timeout_s=timeout_s)
    assert run["state_type"] == "COMPLETED", (deployment, run["state"])
    return run


def _repairs_of(stack: Stack, account: str) -> list[dict[str, Any]]:
    return [
        run
        for run in stack.flow_runs("repair/repair")
        if (run["parameters"].get("autopsy") or {}).get("account") == account
    ]


def test_every_deployment_completes_on_its_defaults_and_the_chain_starts_one_repair(
    stack: Stack,
) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    _completed(stack, "ingest-market-data/ingest-daily", {})
    # The paper account, on the last session
    _completed(stack, "weekly-rebalance/rebalance-weekly", {})
    early = _completed(stack, "attribution/attribution-daily", {})
    assert early["state_name"] == "NotEnoughSessions", early[
        "state"
    ]  # one session of NAV: said, not failed

    _completed(stack, "weekly-rebalance/rebalance-weekly", {"account": ACCOUNT, "as_of": OPENED_ON})
    chain = _completed(stack, "daily-chain/daily-chain", {})
    assert chain["state_name"] == "Completed", chain["state"]
    ledger = Ledger(
        get_settings(store={"home": stack.config.home}, ledger={"url": None}).ledger_url
    )
    nav = ledger.nav_frame(ACCOUNT)
    assert [f"{d:%m-%d}" for d in nav["date"]] == [
        "02-11",
        "02-12",
        "02-13",
        "02-24",
        "02-25",
        "02-26",
        "02-27",
    ]
    assert set(ledger.fills_frame(ACCOUNT)["date"].astype(str)) == {
        OPENED_ON
    }  # marked, never traded
    alerts = ledger.alerts(ACCOUNT)
    assert alerts, "the chain raised no alert"

    deadline = time.monotonic() + 180
    while not _repairs_of(stack, ACCOUNT) and time.monotonic() < deadline:
        time.sleep(1)
    (repair,) = _repairs_of(stack, ACCOUNT)  # the trigger started one run for the alert
    assert repair["parameters"]["autopsy"]["alert_id"] in {a["alert_id"] for a in alerts}
    paused = stack.wait_for(
        repair["id"], {"PAUSED", "COMPLETED", "FAILED", "CRASHED", "CANCELLED"}, 240
    )
    assert paused["state_type"] == "PAUSED", paused[
        "state"
    ]  # waiting for a person to approve the mandate

    # The next scheduled run, no new session
    again = _completed(stack, "daily-chain/daily-chain", {})
    assert again["state_name"] == "NoNewSession", again["state"]
    assert len(_repairs_of(stack, ACCOUNT)) == 1  # each alert starts at most one repair

    # The reviewer rejects through the API (as the UI's form does); the run ends, and says why.
    stack.resume(repair["id"], {"decision": "reject", "reason": "e2e chain reviewer says no"})
    done = stack.wait_for(repair["id"], timeout_s=180)
    assert done["state_type"] in ("COMPLETED", "FAILED"), done["state"]
    outcomes = [
        json.loads(p.read_text())
        for p in (stack.config.home / "runs").glob("repair-*/outcome.json")
    ]
    assert any(
        o["status"] == "rejected" and "e2e chain reviewer says no" in o["reason"] for o in outcomes
    )
