"""Headless Debian chromium on the real stack's Prefect UI: deployments and completed runs are
listed, a run's chart artifacts load over HTTP from the webhook's /reports route, its tearsheet
opens from the run page, and nothing overflows a 1280-px laptop screen. Screenshots are kept in
test-artifacts/."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser import (
    browser_page,
    layout,
    needs_chromium,
    screenshot,
    wait_for,
    wait_for_images,
)
from tests.diagnostics.conftest import seed_account_home
from tests.e2e.conftest import Stack

pytestmark = [pytest.mark.e2e, needs_chromium]
ACCOUNT = "browser"


def _ui(page: Any, url: str, settle_on: str) -> str:
    """Open a UI page and wait until the JS app has rendered `settle_on`; returns the page's
    text."""
    page.goto(url)
    page.wait_for_selector(f"text={settle_on}", timeout=60_000)
    return str(page.inner_text("body"))


@pytest.fixture(scope="module")
def attribution_run(stack: Stack) -> dict[str, Any]:
    """The `attribution-daily` deployment, run by the stack's worker for an account with two
    versions."""
    seed_account_home(stack.config.home, account=ACCOUNT)
    run_id = stack.run_deployment("attribution/attribution-daily", {"account": ACCOUNT})
    run = stack.wait_for(run_id, timeout_s=300)
    assert run["state_type"] == "COMPLETED", run["state"]
    found = stack.api.post(
        "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [run_id]}}}
    ).json()
    by_key = {a["key"]: a for a in found if a["key"]}
    return {
        "run": run,
        "artifacts": {
            "markdown": by_key[f"attribution-{ACCOUNT}"],
            "image": by_key[f"attribution-equity-{ACCOUNT}"],
            "link": by_key[f"attribution-tearsheet-{ACCOUNT}"],
        },
    }


def test_ui_lists_deployments_and_completed_runs(
    stack: Stack, completed_repair: dict[str, Any]
) -> None:
    completed = [
        run for run in stack.flow_runs("repair/repair") if run["state_type"] == "COMPLETED"
    ]
    assert completed, "no completed repair run on the server"
    with browser_page() as page:
        text = _ui(page, f"{stack.config.ui_url}/deployments", "rebalance-weekly")
        for name in (
            "daily-chain",
            "ingest-daily",
            "rebalance-weekly",
            "attribution-daily",
            "repair",
        ):
            assert name in text, f"deployment {name} not shown in the UI"
        screenshot(page, "prefect-ui-deployments.png")
        text = _ui(page, f"{stack.config.ui_url}/runs", completed[0]["name"])
        # the list shows a run's state by its name: a repair's is `Promoted` (or `Rejected`), not
        # `Completed`, which the list shows only while other runs (the chain's) are in it
        assert completed[0]["state_name"] in text
        screenshot(page, "prefect-ui-runs.png")
        alert = completed_repair["autopsy"]["alert_id"]
        text = _ui(
            page, f"{stack.config.ui_url}/runs/flow-run/{completed_repair['run']['id']}", alert
        )
        assert f"alert:{alert}" in text  # the repair run carries its alert, shown as a tag
        screenshot(page, "prefect-ui-repair-run.png")


def test_run_artifacts_show_their_charts_and_fit_a_laptop(
    stack: Stack, attribution_run: dict[str, Any]
) -> None:
    artifacts = attribution_run["artifacts"]
    image, markdown = artifacts["image"], artifacts["markdown"]
    assert image["type"] == "image" and markdown["type"] == "markdown"
    reports = f"{stack.config.webhook_url}/reports/"
    assert str(image["data"]).startswith(reports)  # an http URL the browser can load, not file://
    with browser_page() as page:
        page.goto(f"{stack.config.ui_url}/artifacts/artifact/{image['id']}")
        page.wait_for_selector(f"img[src^='{reports}']", timeout=60_000)
        wait_for_images(page, 1)
        found = layout(page)
        charts = [i for i in found["images"] if i["src"].startswith(reports)]
        assert charts and all(i["natural"] > 0 for i in charts), found["images"]
        screenshot(page, "prefect-ui-image-artifact.png")

        page.goto(f"{stack.config.ui_url}/artifacts/artifact/{markdown['id']}")
        page.wait_for_selector("text=Key figures", timeout=60_000)
        wait_for_images(page, 3)
        found = layout(page)
        charts = [i for i in found["images"] if i["src"].startswith(reports)]
        assert len(charts) == 3 and all(i["natural"] > 0 for i in charts), found["images"]
        assert found["overflowing"] == [], found["overflowing"]
        assert found["scrollWidth"] <= found["width"] == 1280, found
        screenshot(page, "prefect-ui-report-artifact.png")


def test_the_tearsheet_opens_from_the_run_page(
    stack: Stack, attribution_run: dict[str, Any]
) -> None:
    run = attribution_run["run"]
    tearsheet = str(attribution_run["artifacts"]["link"]["data"])
    url = tearsheet[tearsheet.index("(") + 1 : -1]  # the link artifact is "[text](url)"
    assert url.startswith(f"{stack.config.webhook_url}/reports/") and "tearsheet.html?sig=" in url
    # a tall window: the Artifacts tab lists task-run artifacts in a virtual scroller that renders
    # what is in view
    with browser_page({"width": 1280, "height": 2400}) as page:
        page.goto(f"{stack.config.ui_url}/runs/flow-run/{run['id']}")
        # The run's tab
        wait_for(page, "text=Artifacts", "prefect-ui-attribution-run-failed.png").click()
        card = f"a[href$='/artifacts/artifact/{attribution_run['artifacts']['link']['id']}']"
        # The run's Artifacts tab lists the link
        wait_for(page, card, "prefect-ui-attribution-run-failed.png")
        # The list re-renders as it polls
        href = page.wait_for_function(
            "s => document.querySelector(s)?.getAttribute('href')", arg=card, timeout=60_000
        ).json_value()
        screenshot(page, "prefect-ui-attribution-run.png")
        page.goto(stack.config.ui_url + str(href))  # follow the card, as a click would
        # The tearsheet link is there
        wait_for(page, f"a[href='{url}']", "prefect-ui-link-artifact-failed.png")
        page.goto(url)  # follow it (the UI may open links in a new tab)
        wait_for_images(page, 3)
        found = layout(page)
        assert all(i["natural"] > 0 for i in found["images"]) and len(found["images"]) >= 3, found[
            "images"
        ]
        assert found["overflowing"] == [] and found["scrollWidth"] <= 1280, found
        assert "Friction: turnover, costs, slippage leakage, ADV participation" in page.inner_text(
            "body"
        )
        screenshot(page, "tearsheet-from-prefect.png")
