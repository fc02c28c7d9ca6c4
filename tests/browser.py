"""Headless Debian chromium driven by Playwright (no browser download): open a page, wait for its
images, measure layout, keep a screenshot under test-artifacts/."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAPTOP = {"width": 1280, "height": 800}
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (make test installs it as root: apt-get install chromium)",
)

# Every <img> (including those inside artifact iframes' parents) and every table that is wider than
# the box that holds it, or than the window.
LAYOUT_PROBE = """() => {
  const width = document.documentElement.clientWidth;
  const images = Array.from(document.images).map(
    i => ({src: i.src.slice(0, 120), complete: i.complete, natural: i.naturalWidth}));
  const overflowing = Array.from(document.querySelectorAll('table')).filter(t => {
    const box = t.getBoundingClientRect();
    const parent = t.parentElement;
    return box.right > width + 1 || (parent && parent.scrollWidth > parent.clientWidth + 1);
  }).map(t => (t.innerText || '').slice(0, 80));
  return {width, scrollWidth: document.documentElement.scrollWidth, images, overflowing};
}"""


@contextmanager
def browser_page(viewport: dict[str, int] | None = None) -> Iterator[Any]:
    """A fresh page in headless chromium; closed afterwards."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport=viewport or LAPTOP)
            yield page
        finally:
            browser.close()


def wait_for_images(page: Any, minimum: int, timeout_ms: int = 30_000) -> None:
    """Until at least `minimum` images are in the page and every one has finished loading."""
    page.wait_for_function(
        "n => document.images.length >= n && Array.from(document.images).every(i => i.complete)",
        arg=minimum,
        timeout=timeout_ms,
    )


def layout(page: Any) -> dict[str, Any]:
    """The probe's findings: window width, document scroll width, images, overflowing tables."""
    return dict(page.evaluate(LAYOUT_PROBE))


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as test output."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_for(page: Any, selector: str, shot: str, timeout_ms: int = 60_000) -> Any:
    """A locator of the first match, once visible (it re-finds the element when the app re-renders);
    on a timeout the page is kept as `shot` (PNG and HTML) for the post-mortem."""
    locator = page.locator(selector).first
    try:
        locator.wait_for(timeout=timeout_ms)
        return locator
    except Exception:
        screenshot(page, shot)
        (ARTIFACTS / shot).with_suffix(".html").write_text(page.content())
        raise
