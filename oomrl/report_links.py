"""Signed HTTP links to report files under OOMRL_HOME/runs, served read-only by the webhook app.

A report's charts and tearsheet must open from the Prefect UI in a browser. So artifacts link them
over HTTP (`/reports/<folder>/<file>`). They never use `file://` URLs, which the browser refuses.
Each link carries an HMAC of its path keyed by the webhook secret. Whoever can read the Prefect
artifacts can open the file. Nobody can list or guess the others. OOMRL_REPORTS_URL is the
webhook's base URL as the browser reaches it. `oomrl server up` sets it for the worker.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from oomrl.errors import ReportLinkError

REPORTS_URL_ENV = "OOMRL_REPORTS_URL"
SECRET_ENV = "OOMRL_WEBHOOK_SECRET"
ROUTE = "/reports"
FOLDER = re.compile(r"^report-[A-Za-z0-9_.-]{1,200}$")
FILE = re.compile(r"^[A-Za-z0-9_-]{1,100}\.(html|png|md|csv)$")
_KEY_LABEL = b"oomrl report links v1"  # the webhook secret is not used as is: a derived key


def _configured() -> dict[str, str]:
    """The two settings links need, by the names `from_env` reads."""
    from oomrl.settings import get_settings

    settings = get_settings()
    return {
        REPORTS_URL_ENV: settings.runtime.reports_url or "",
        SECRET_ENV: settings.webhook.secret or "",
    }


def _key(secret: str) -> bytes:
    return hmac.new(secret.encode(), _KEY_LABEL, hashlib.sha256).digest()


def check_path(folder: str, name: str) -> None:
    """Only `report-*` folders and plain file names of the served kinds.

    No separators, no leading dots.
    """
    if not FOLDER.fullmatch(folder) or folder in (".", "..") or ".." in folder:
        raise ReportLinkError(f"not a report folder: {folder!r}")
    if not FILE.fullmatch(name):
        raise ReportLinkError(f"not a report file: {name!r}")


def signature(secret: str, folder: str, name: str) -> str:
    """Hex HMAC-SHA256 of "<folder>/<name>" under the derived key (32 hex digits)."""
    return hmac.new(_key(secret), f"{folder}/{name}".encode(), hashlib.sha256).hexdigest()[:32]


def valid(secret: str, folder: str, name: str, given: str | None) -> bool:
    """Whether `given` is the signature of this path (constant-time)."""
    return bool(given) and hmac.compare_digest(signature(secret, folder, name), str(given))


@dataclass(frozen=True)
class ReportLinks:
    """Turns report files into signed URLs under `base_url`."""

    base_url: str
    secret: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ReportLinks | None:
        """Links when both the base URL and the webhook secret are configured, else None."""
        source = env if env is not None else _configured()
        base, secret = source.get(REPORTS_URL_ENV, "").strip(), source.get(SECRET_ENV, "").strip()
        if not base or not secret:
            return None
        if not base.startswith(("http://", "https://")):
            raise ReportLinkError(f"{REPORTS_URL_ENV} must be an http(s) URL, got {base!r}")
        return cls(base.rstrip("/"), secret)

    def url(self, path: Path) -> str:
        """The signed URL of a file in a report folder (`.../report-x/equity.png`)."""
        folder, name = path.parent.name, path.name
        check_path(folder, name)
        sig = signature(self.secret, folder, name)
        return f"{self.base_url}{ROUTE}/{quote(folder)}/{quote(name)}?sig={sig}"
