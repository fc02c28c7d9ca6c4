"""Report files over HTTP: signed links, the webhook's read-only /reports route, and what it
refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from oomrl.errors import ReportLinkError
from oomrl.report_links import ReportLinks, signature
from oomrl.settings import WebhookSettings
from oomrl.webhook.app import create_app
from oomrl.webhook.deliveries import DeliveryStore

SECRET = "reports-secret-0123456789"


class NoLaunches:
    async def launch(
        self, autopsy: object, alert_id: str
    ) -> object:  # pragma: no cover - never called
        raise AssertionError("a GET must not start anything")


@pytest.fixture()
def served(oomrl_home: Path) -> tuple[TestClient, Path, ReportLinks]:
    folder = oomrl_home / "runs" / "report-acct-20260101T000000Z"
    folder.mkdir(parents=True)
    (folder / "equity.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    (folder / "tearsheet.html").write_text("<!DOCTYPE html><title>t</title>")
    (oomrl_home / "secret.png").write_bytes(b"not a report")
    config = WebhookSettings(secret=SECRET, db_url=f"sqlite:///{oomrl_home / 'webhook.db'}")
    app = create_app(
        config, launcher=NoLaunches(), store=DeliveryStore(config.store_url("sqlite://"))
    )  # type: ignore[arg-type]
    return TestClient(app), folder, ReportLinks("http://testserver", SECRET)


def _path(url: str) -> str:
    return url.removeprefix("http://testserver")


def test_a_signed_link_serves_the_file_with_its_type(
    served: tuple[TestClient, Path, ReportLinks],
) -> None:
    client, folder, links = served
    png = client.get(_path(links.url(folder / "equity.png")))
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png.content == (folder / "equity.png").read_bytes()
    page = client.get(_path(links.url(folder / "tearsheet.html")))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert (
        "script" not in page.headers["content-security-policy"]
        and "default-src 'none'" in page.headers["content-security-policy"]
    )
    assert page.headers["x-content-type-options"] == "nosniff"


def test_unsigned_forged_and_foreign_paths_are_refused(
    served: tuple[TestClient, Path, ReportLinks],
) -> None:
    client, folder, links = served
    good = links.url(folder / "equity.png")
    assert client.get(_path(good).split("?")[0]).status_code == 403
    forged = _path(good)[:-1] + ("1" if good.endswith("0") else "0")
    assert client.get(forged).status_code == 403
    other = ReportLinks("http://testserver", "another-secret-0123456789").url(folder / "equity.png")
    assert client.get(_path(other)).status_code == 403
    # a signature for a name that is no report file, or a folder that is no report folder
    for name in ("secret.png", "ledger.db"):
        response = client.get(
            f"/reports/{folder.name}/{name}?sig={signature(SECRET, folder.name, name)}"
        )
        assert response.status_code == 404
    escape = f"/reports/..%2F/secret.png?sig={signature(SECRET, '../', 'secret.png')}"
    assert client.get(escape).status_code == 404
    missing = links.url(folder / "rolling_ir.png")
    assert client.get(_path(missing)).status_code == 404
    assert client.post(_path(good)).status_code == 405  # read-only


def test_symlinks_are_not_followed(served: tuple[TestClient, Path, ReportLinks]) -> None:
    client, folder, links = served
    (folder / "friction.png").symlink_to(folder.parent.parent / "secret.png")
    assert client.get(_path(links.url(folder / "friction.png"))).status_code == 404
    linked = folder.parent / "report-linked"
    linked.symlink_to(folder)
    assert client.get(_path(links.url(linked / "equity.png"))).status_code == 404


def test_links_come_from_the_environment() -> None:
    assert ReportLinks.from_env({}) is None
    assert ReportLinks.from_env({"OOMRL_REPORTS_URL": "http://h:1"}) is None  # no secret, no links
    links = ReportLinks.from_env(
        {"OOMRL_REPORTS_URL": "http://h:1/", "OOMRL_WEBHOOK_SECRET": SECRET}
    )
    assert links is not None and links.base_url == "http://h:1"
    url = links.url(Path("/x/runs/report-a-1/equity.png"))
    assert (
        url.startswith("http://h:1/reports/report-a-1/equity.png?sig=")
        and len(url.split("sig=")[1]) == 32
    )
    with pytest.raises(ReportLinkError, match="http"):
        ReportLinks.from_env({"OOMRL_REPORTS_URL": "file:///etc", "OOMRL_WEBHOOK_SECRET": SECRET})
    with pytest.raises(ReportLinkError, match="not a report folder"):
        links.url(Path("/x/runs/repair-1/outcome.json"))
    with pytest.raises(ReportLinkError, match="not a report file"):
        links.url(Path("/x/runs/report-a-1/ledger.db"))
