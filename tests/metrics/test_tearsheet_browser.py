"""The tearsheet in headless chromium at laptop width: every image loads, no table overflows 1280
px, labels explain themselves on hover, and the page needs no network."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser import browser_page, layout, needs_chromium, screenshot, wait_for_images


@pytest.mark.slow
@needs_chromium
def test_tearsheet_fits_a_laptop_screen_with_every_image_loaded(traded_report: Any) -> None:
    with browser_page() as page:
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(traded_report.html.resolve().as_uri())
        wait_for_images(page, 4)
        found = layout(page)
        screenshot(page, "tearsheet-1280.png")
        hover = page.locator("th", has_text="Slippage leakage (% a year)").first.get_attribute(
            "title"
        )
        glossary = page.locator("dl.glossary dt").all_inner_texts()
    assert found["width"] == 1280 and found["scrollWidth"] <= 1280, found
    assert len(found["images"]) == 4  # equity, rolling IR, underwater, friction
    assert all(image["complete"] and image["natural"] > 0 for image in found["images"]), found[
        "images"
    ]
    assert found["overflowing"] == [], found["overflowing"]
    assert hover and hover.startswith("Frictionless − realized return per session")
    assert "CAPM alpha (% a year)" in glossary and "Information ratio" in glossary
    assert all(url.startswith(("file:", "data:")) for url in requests), requests


@pytest.mark.slow
@needs_chromium
def test_a_narrow_window_scrolls_tables_not_the_page(traded_report: Any) -> None:
    """Below laptop width the page still never needs a horizontal scrollbar for its text."""
    with browser_page({"width": 1024, "height": 768}) as page:
        page.goto(traded_report.html.resolve().as_uri())
        wait_for_images(page, 4)
        found = layout(page)
    assert found["scrollWidth"] <= 1024 and found["overflowing"] == [], found
