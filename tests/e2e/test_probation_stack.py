"""Probation on a stack of its own (real Prefect server, worker, webhook), the sample played
forward: the docs' webhook example, approved in its form, puts the repaired version on probation;
the daily chain trades its shadow book forward and hands it the capital; another account's
challenger, judged by a stricter rule on the same forward sessions, is retired with an autopsy and
an event."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.e2e.stacks import fresh_env, oomrl, own_stack, send_docs_example
from tests.e2e.test_day_one import artifacts_of

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(2700),
]  # a stack of its own, two repairs through the gate
CLOCK = "2026-01-05"  # the sample is revealed up to this session; each chain run ingests the next
# The worker's OOMRL_AGENT_PROBATION_SESSIONS: the docs example's repair takes it
PAPER_SESSIONS = 2
DESK_SESSIONS = 3  # the second repair's own `probation` parameter
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
LENIENT = {
    "OOMRL_AGENT_PROMOTION_MARGIN": "5.0"
}  # non-inferiority by 500 % a year: any honest book keeps up
STRICT = {"OOMRL_AGENT_PROMOTION_TEST": "superiority", "OOMRL_AGENT_PROMOTION_MARGIN": "5.0"}


@pytest.fixture(scope="module")
def forward_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`oomrl server up` on a fresh home with the sample clock at CLOCK and 2-session probations."""
    home = tmp_path_factory.mktemp("probation") / "home"
    env = {
        **fresh_env(home),
        "OOMRL_SAMPLE_CLOCK": CLOCK,
        "OOMRL_AGENT_PROBATION_SESSIONS": str(PAPER_SESSIONS),
        "OOMRL_LLM_PROVIDER": "offline",
        "OOMRL_REPAIR_MAX_RUNNING": "8",
    }  # the chain's own alerts start repairs that wait Paused beside these
    with own_stack(home, env) as stack:
        yield stack


def run(
    stack: Stack,
    deployment: str,
    parameters: dict[str, Any],
    env: dict[str, str] | None = None,
    timeout_s: float = 900,
) -> dict[str, Any]:
    """A deployment run (with `env` on top of the worker's for this run only, as job variables),
    finished."""
    found = stack.deployment(deployment)
    body: dict[str, Any] = {"parameters": parameters}
    if env:
        body["job_variables"] = {"env": env}
    run_id = str(
        stack.call("POST", f"/deployments/{found['id']}/create_flow_run", json=body).json()["id"]
    )
    return stack.wait_for(run_id, FINAL, timeout_s=timeout_s)


def chain(stack: Stack, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One daily-chain run on its defaults: the sample clock reveals the next session."""
    done = run(stack, "daily-chain/daily-chain", {}, env)
    assert (done["state_type"], done["state_name"]) == ("COMPLETED", "Completed"), done["state"]
    return done


def events(stack: Stack, name: str, account: str, timeout_s: float = 120) -> list[dict[str, Any]]:
    """The events `name` about `account`, once the server has stored at least one (it stores them a
    moment later)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = stack.call(
            "POST", "/events/filter", json={"filter": {"event": {"name": [name]}}, "limit": 50}
        ).json()
        about = [
            e
            for e in found.get("events", [])
            if e["resource"].get("prefect.resource.name") == account
        ]
        if about or time.monotonic() > deadline:
            return about
        time.sleep(1)


def ledger(stack: Stack) -> Any:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    return Ledger(get_settings(store={"home": stack.config.home}, ledger={"url": None}).ledger_url)


def versions_list(stack: Stack, account: str) -> dict[str, str]:
    """tag -> state, as `oomrl versions list` prints them."""
    listed = oomrl(stack.env, "versions", "list", "--account", account)
    assert listed.returncode == 0, listed.stderr
    return {
        line.lstrip("* ").split()[0]: line.lstrip("* ").split()[3]
        for line in listed.stdout.splitlines()
    }


@pytest.fixture(scope="module")
def on_probation(forward_stack: Stack) -> dict[str, Any]:
    """Both accounts trade v1 from CLOCK and are marked once; the docs' example (paper, approved in
    its form) and a repair run of `desk` (its own probation length) both end On probation."""
    stack = forward_stack
    for account in ("paper", "desk"):
        opened = run(stack, "weekly-rebalance/rebalance-weekly", {"account": account})
        assert opened["state_type"] == "COMPLETED", opened["state"]
    # The next session: both accounts marked, their alerts would have something to read
    chain(stack)
    answer = send_docs_example(stack, stack.config.webhook_url)
    assert answer["alert_id"] == "ops-1" and answer["duplicate"] is False, answer
    desk = stack.run_deployment(
        "repair/repair",
        {
            "autopsy": {"alert_id": "desk-1", "account": "desk"},
            "auto_approve": True,
            "probation": DESK_SESSIONS,
        },
    )
    paused = stack.wait_for(answer["flow_run_id"], {"PAUSED", *FINAL}, timeout_s=600)
    assert paused["state_type"] == "PAUSED", paused["state"]  # the mandate waits for a person
    stack.resume(paused["id"], {"decision": "approve", "reason": "e2e: forward trial first"})
    repairs = {
        account: stack.wait_for(run_id, FINAL, timeout_s=1500)
        for account, run_id in (("paper", paused["id"]), ("desk", desk))
    }
    return {"repairs": repairs}


def test_the_docs_example_goes_on_probation_and_the_chain_promotes_it(
    forward_stack: Stack, on_probation: dict[str, Any]
) -> None:
    stack, book = forward_stack, ledger(forward_stack)
    paper = on_probation["repairs"]["paper"]
    assert (paper["state_type"], paper["state_name"]) == ("COMPLETED", "On probation"), paper[
        "state"
    ]
    (started,) = events(stack, "oomrl.strategy.probation", "paper")
    tag = started["payload"]["tag"]
    assert (
        book.active_version("paper~" + tag)
        == started["payload"]["sha"]
        != book.active_version("paper")
    )
    assert versions_list(stack, "paper")[tag] == "probation"
    # Forward session 1 of 2: the shadow trades, both books are marked, nothing decided
    first = chain(stack)
    shown = artifacts_of(stack, [first["id"]])
    assert f"1 of {PAPER_SESSIONS}" in str(shown[f"probation-paper-{tag}"]["data"])
    # It bought its book on the first forward session
    assert book.nav_frame("paper~" + tag)["turnover"].iloc[0] > 0
    decided = chain(stack, LENIENT)  # forward session 2 of 2: the chain decides
    result = stack.call("GET", f"/flow_runs/{decided['id']}").json()
    assert book.active_version("paper") == started["payload"]["sha"]  # the capital moved
    assert versions_list(stack, "paper")[tag] == "active"
    (promoted,) = [
        e
        for e in events(stack, "oomrl.strategy.promoted", "paper")
        if e["payload"].get("probation")
    ]
    assert (
        promoted["payload"]["tag"] == tag
        and promoted["payload"]["probation"]["sessions"] == PAPER_SESSIONS
    )
    assert promoted["payload"]["probation"]["decided_by"] == "the daily chain"
    evidence = str(artifacts_of(stack, [decided["id"]])[f"probation-paper-{tag}"]["data"])
    assert (
        f"{PAPER_SESSIONS} of {PAPER_SESSIONS} (0 left)" in evidence
        and "| champion | challenger |" in evidence
    )
    assert result["state_name"] == "Completed"


def test_a_challenger_worse_forward_is_retired_with_an_autopsy(
    forward_stack: Stack, on_probation: dict[str, Any]
) -> None:
    stack, book = forward_stack, ledger(forward_stack)
    desk = on_probation["repairs"]["desk"]
    assert (desk["state_type"], desk["state_name"]) == ("COMPLETED", "On probation"), desk["state"]
    (probation,) = [p for p in book.probations("desk")]
    # The paper test may have run the first forward sessions already
    while probation["status"] == "open":
        chain(stack, STRICT)
        (probation,) = [p for p in book.probations("desk")]
    assert probation["status"] == "retired" and "superiority" in probation["reason"]
    assert versions_list(stack, "desk")[probation["tag"]] == "retired"
    assert book.active_version("desk") != probation["sha"]
    (retired,) = events(stack, "oomrl.strategy.retired", "desk")
    autopsy = retired["payload"]["autopsy"]
    assert (
        retired["payload"]["tag"] == probation["tag"]
        and autopsy["trigger"]["rule"] == "probation_retired"
    )
    assert (
        autopsy["account"] == "desk"
        and autopsy["diagnostics"]["strategy_version"] == probation["sha"]
    )
    assert [a["alert_id"] for a in book.alerts("desk") if a["rule"] == "probation_retired"] == [
        autopsy["alert_id"]
    ]
    # the forward autopsy starts desk's next repair (prefect.yaml's retired-challenger trigger),
    # from the champion
    deadline = time.monotonic() + 300
    started: list[dict[str, Any]] = []
    while not started and time.monotonic() < deadline:
        started = [
            r
            for r in stack.flow_runs("repair/repair")
            if (r["parameters"].get("autopsy") or {}).get("alert_id") == autopsy["alert_id"]
        ]
        time.sleep(1)
    assert started, "the retirement started no repair"
    next_repair = stack.wait_for(started[0]["id"], {"PAUSED", *FINAL}, timeout_s=600)
    assert next_repair["state_type"] == "PAUSED", next_repair[
        "state"
    ]  # its mandate waits for a person
