"""Day one, as a new user meets it: a fresh OOMRL_HOME, a fresh `oomrl server up` (its own stack,
not the suite's shared one) and every deployment run on its defaults only, no parameter set by hand.
The sample clock `server up` sets plays the bundled sample forward one session per chain run, so
within a few runs the stack shows a report with its charts, an alert, a repair paused for approval
and, once the form is submitted, a final state with its evidence; no run logs an ERROR. The browser
tests open the approval form and the repair's artifacts in Debian's chromium at 1280 px: every field
described, no table wider than its box; their screenshots are kept in test-artifacts/ (copied to
docs/)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser import (
    browser_page,
    layout,
    needs_chromium,
    screenshot,
    wait_for,
    wait_for_images,
)
from tests.e2e.conftest import Stack
from tests.e2e.stacks import fresh_env, own_stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(2700),
]  # a stack of its own, a repair through the gate
ACCOUNT = "paper"  # the default account: nobody names it
DAY_ONE = "2024-07-01"  # `oomrl server up`'s sample clock
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
# What a repair's ending leaves as its evidence (docs/operations.md, "How a repair run ends").
EVIDENCE = {
    "Promoted": "repair-cross-validation",
    "On probation": "repair-cross-validation",
    "Cross-validation failed": "repair-cross-validation",
    "Tests rejected": "repair-test-gen-1",
    "Patch rejected": "repair-code-patch-1",
}


@pytest.fixture(scope="module")
def day_one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`oomrl server up` on a home that has never been used; `oomrl server down` afterwards."""
    home = tmp_path_factory.mktemp("day-one") / "home"
    with own_stack(home, fresh_env(home)) as stack:
        yield stack


def quick_run(stack: Stack, deployment: str) -> dict[str, Any]:
    """Run a deployment as the UI's Quick run does: its defaults, nothing set."""
    run = stack.wait_for(stack.run_deployment(deployment, {}), timeout_s=900)
    assert run["state_type"] == "COMPLETED", (deployment, run["state"])
    return run


def artifacts_of(stack: Stack, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The artifacts the runs (and their subflows' runs) published, by key, newest first."""
    found = stack.call(
        "POST",
        "/artifacts/filter",
        json={"artifacts": {"flow_run_id": {"any_": run_ids}}, "sort": "CREATED_DESC"},
    ).json()
    by_key: dict[str, dict[str, Any]] = {}
    for artifact in found:
        by_key.setdefault(str(artifact["key"]), artifact)
    return by_key


def subflows_of(stack: Stack, run_id: str) -> list[str]:
    tasks = stack.call(
        "POST", "/task_runs/filter", json={"flow_runs": {"id": {"any_": [run_id]}}}
    ).json()
    children = {
        t["state"]["state_details"].get("child_flow_run_id") for t in tasks if t.get("state")
    }
    return [str(child) for child in children if child]


def run_logs(stack: Stack, run_ids: list[str], level: int = 0) -> list[str]:
    """The runs' log messages at `level` or above (cut to 300 characters)."""
    logs = stack.call(
        "POST",
        "/logs/filter",
        json={"logs": {"flow_run_id": {"any_": run_ids}, "level": {"ge_": level}}},
    ).json()
    return [str(log["message"])[:300] for log in logs]


def error_logs(stack: Stack, run_ids: list[str]) -> list[str]:
    return run_logs(stack, run_ids, level=40)


def repair_runs(stack: Stack) -> list[dict[str, Any]]:
    return [
        r
        for r in stack.flow_runs("repair/repair")
        if (r["parameters"].get("autopsy") or {}).get("account") == ACCOUNT
    ]


@pytest.fixture(scope="module")
def story(day_one: Stack) -> dict[str, Any]:
    """A first rebalance, then the daily chain twice, all on their defaults; the repair the first
    chain's alert starts, Paused for a person."""
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    stack = day_one
    # Opens `paper` on the clock's session
    opened = quick_run(stack, "weekly-rebalance/rebalance-weekly")
    chains = [quick_run(stack, "daily-chain/daily-chain") for _ in range(2)]
    deadline = time.monotonic() + 300
    # The trigger acts on the alert's event
    while not repair_runs(stack) and time.monotonic() < deadline:
        time.sleep(1)
    (repair,) = repair_runs(stack)
    paused = stack.wait_for(repair["id"], {"PAUSED", *FINAL}, timeout_s=600)
    ledger = Ledger(
        get_settings(store={"home": stack.config.home}, ledger={"url": None}).ledger_url
    )
    return {
        "opened": opened,
        "chains": chains,
        "repair": paused,
        "ledger": ledger,
        "chain_runs": [
            run_id for chain in chains for run_id in [chain["id"], *subflows_of(stack, chain["id"])]
        ],
    }


def test_a_fresh_stack_shows_the_loop_on_its_defaults(
    day_one: Stack, story: dict[str, Any]
) -> None:
    stack, ledger = day_one, story["ledger"]
    nav = ledger.nav_frame(ACCOUNT)  # opened on the clock's session, one more session per chain run
    assert [f"{d:%Y-%m-%d}" for d in nav["date"]] == [DAY_ONE, "2024-07-02", "2024-07-03"]
    assert [c["state_name"] for c in story["chains"]] == ["Completed", "Completed"]
    # a report with its charts: the second run's report has three sessions, its image loads over
    # HTTP
    shown = artifacts_of(stack, story["chain_runs"])
    image = shown[f"attribution-equity-{ACCOUNT}"]
    assert image["type"] == "image" and str(image["data"]).startswith(
        f"{stack.config.webhook_url}/reports/"
    )
    chart = httpx.get(str(image["data"]), timeout=30)
    assert chart.status_code == 200 and chart.content.startswith(b"\x89PNG")
    report = str(shown[f"attribution-{ACCOUNT}"]["data"])
    assert (
        f"{DAY_ONE} .. 2024-07-03" in report
        and "Too short to annualize" in report
        and "![equity](" in report
    )
    # an alert, in the ledger and in the chain's diagnostics artifact
    alerts = ledger.alerts(ACCOUNT)
    assert alerts and f"loss-diagnostics-{ACCOUNT}" in shown
    # a repair the alert started, paused for a person, its form stored
    repair = story["repair"]
    assert repair["state_type"] == "PAUSED", repair["state"]
    assert repair["parameters"]["autopsy"]["alert_id"] in {a["alert_id"] for a in alerts}
    assert repair["state"]["state_details"]["run_input_keyset"]["schema"]
    runs = [story["opened"]["id"], *story["chain_runs"], repair["id"]]
    assert error_logs(stack, runs) == []
    # the rebalance's own line of what it booked, in its run's log (oomrl's logger, through Prefect)
    booked = [m for m in run_logs(stack, [story["opened"]["id"]]) if m.startswith("rebalance of ")]
    assert len(booked) == 1 and f"rebalance of {ACCOUNT} on {DAY_ONE} with " in booked[0], booked
    assert " booked: " in booked[0] and " orders, " in booked[0], booked


@needs_chromium
def test_the_approval_form_describes_every_field_and_fits_a_laptop(
    day_one: Stack, story: dict[str, Any]
) -> None:
    stack, run = day_one, story["repair"]
    with browser_page({"width": 1280, "height": 1400}) as page:
        page.goto(f"{stack.config.ui_url}/runs/flow-run/{run['id']}")
        wait_for(page, "button:has-text('Resume')", "day-one-form-failed.png").click()
        wait_for(page, ".schema-form-property__description", "day-one-form-failed.png")
        page.wait_for_selector("text=Proposed mandate for", timeout=60_000)
        fields = page.evaluate("""() => Array.from(
            document.querySelectorAll('.schema-form-property')).map(f => ({
              label: f.querySelector('.schema-form-property__label')?.innerText || '',
              description:
                f.querySelector('.schema-form-property__description')?.innerText || ''}))""")
        labels = [field["label"] for field in fields]
        # Decision, text, rebalance, the two caps, the tests it supersedes, reason
        assert len(fields) == 7, labels
        assert all(field["description"].strip() for field in fields), fields
        assert any("fraction of ADV" in label for label in labels), labels  # units in the titles
        found = layout(page)
        assert found["overflowing"] == [] and found["scrollWidth"] <= 1280, found
        text = page.inner_text("body")
        assert "% of ADV" in text and "% of NAV" in text and "0.001119942" not in text
        screenshot(page, "day-one-approval-form.png")
        # Approve: the form's default decision. The UI's own resume request is read, so a failure
        # names what the server answered rather than only that the run stayed Paused.
        answer = submit_resume(page)
        assert answer.ok, f"the server answered the form's resume {answer.status}: {answer.text()}"
        # It leaves Paused within 120 s, or wait_for fails with the worker log's tail
        stack.wait_for(run["id"], {"RUNNING", *FINAL}, timeout_s=120)


def submit_resume(page: Any) -> Any:
    """Click the form's Submit until the UI sends its resume request (a click landing while the
    form re-renders sends nothing); the response, or a screenshot kept if none is sent."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    def is_resume(response: Any) -> bool:
        return bool(response.request.method == "POST" and response.url.endswith("/resume"))

    for _ in range(3):
        try:
            with page.expect_response(is_resume, timeout=30_000) as answer:
                wait_for(page, "button:has-text('Submit')", "day-one-submit-failed.png").click()
            return answer.value
        except PlaywrightTimeout:
            continue
    screenshot(page, "day-one-submit-failed.png")
    raise AssertionError("clicking Submit three times sent no resume request")


@pytest.fixture(scope="module")
def finished(day_one: Stack, story: dict[str, Any]) -> dict[str, Any]:
    """The repair after its approval (through the form above, or here through the API as the UI
    sends it)."""
    stack, run_id = day_one, story["repair"]["id"]
    if stack.flow_run(run_id)["state_type"] == "PAUSED":
        stack.resume(run_id, {"decision": "approve"})
    return stack.wait_for(run_id, FINAL, timeout_s=1500)


def test_after_approval_the_repair_ends_in_a_named_state_with_its_evidence(
    day_one: Stack, finished: dict[str, Any]
) -> None:
    stack = day_one
    assert finished["state_name"] in EVIDENCE, finished["state"]
    shown = artifacts_of(stack, [finished["id"]])
    assert {"repair-autopsy", "repair-outcome", EVIDENCE[finished["state_name"]]} <= set(shown), (
        sorted(shown)
    )
    if EVIDENCE[finished["state_name"]] == "repair-cross-validation":
        # Served by the webhook
        evidence = httpx.get(str(shown["repair-evidence"]["data"]), timeout=30)
        assert evidence.status_code == 200 and evidence.content.startswith(b"\x89PNG")
        assert str(shown["repair-cross-validation-decision"]["data"]).startswith(
            "# Cross-validation: "
        )
    # A refusal too ends in one line, not a traceback
    assert error_logs(stack, [finished["id"]]) == []


@needs_chromium
def test_the_repairs_artifacts_fit_a_laptop(day_one: Stack, finished: dict[str, Any]) -> None:
    stack = day_one
    shown = artifacts_of(stack, [finished["id"]])
    with browser_page({"width": 1280, "height": 2400}) as page:
        for key, artifact in sorted(shown.items()):
            if artifact["type"] == "progress":
                continue
            page.goto(f"{stack.config.ui_url}/artifacts/artifact/{artifact['id']}")
            wait_for(page, f"text={key}", f"day-one-{key}-failed.png")
            page.wait_for_load_state("networkidle")
            wait_for_images(
                page, 1 if key in ("repair-evidence", "repair-cross-validation-decision") else 0
            )
            found = layout(page)
            assert all(image["natural"] > 0 for image in found["images"]), (key, found["images"])
            assert found["overflowing"] == [] and found["scrollWidth"] <= 1280, (key, found)
            if key in ("repair-cross-validation", "repair-cross-validation-decision"):
                screenshot(page, f"day-one-{key}.png")
