"""GET /reports/<folder>/<file>?sig=…: the read-only route serving report files to the Prefect UI.

The signature is checked first: 403 before the file system is touched. Then the path rules. Then
the file must be a regular file directly inside OOMRL_HOME/runs/<folder> (no symlinks). The
tearsheet is served with a Content-Security-Policy that allows no script and no network. It only
needs its inlined images.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, JSONResponse, Response

from oomrl.errors import ReportLinkError
from oomrl.report_links import ROUTE, check_path, valid

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".png": "image/png",
    ".md": "text/markdown; charset=utf-8",
    ".csv": "text/csv; charset=utf-8",
}
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "private, max-age=3600",
    "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'",
    "Referrer-Policy": "no-referrer",
}


def reports_router(runs_dir: Path, secret: str) -> APIRouter:
    """The route over `runs_dir`, checking links signed with `secret`."""
    router = APIRouter()
    root = runs_dir.resolve()

    @router.get(ROUTE + "/{folder}/{name}", response_model=None)
    def report_file(folder: str, name: str, sig: str | None = Query(default=None)) -> Response:
        if not valid(secret, folder, name, sig):
            return JSONResponse(status_code=403, content={"detail": "missing or bad signature"})
        try:
            check_path(folder, name)
        except ReportLinkError as exc:
            return JSONResponse(status_code=404, content={"detail": str(exc)})
        path = root / folder / name
        if (
            path.is_symlink()
            or path.parent.is_symlink()
            or not path.is_file()
            or path.parent.parent != root
        ):
            return JSONResponse(
                status_code=404, content={"detail": f"no report file {folder}/{name}"}
            )
        return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)

    return router
