"""The FastAPI webhook of DESIGN §4.5: signed loss alerts start exactly one repair each."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from oomrl.config import get_settings
from oomrl.webhook.alerts import (
    InvalidAlertError,
    autopsy_from_alertmanager,
    parse_alertmanager,
    parse_loss_alert,
)
from oomrl.webhook.deliveries import DeliveryStore
from oomrl.webhook.launch import Launcher, LaunchError, launcher_for
from oomrl.webhook.settings import WebhookSettings
from oomrl.webhook.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, SignatureError, verify


class _BodyTooLarge(Exception):
    """The request body exceeds the configured limit."""


def _problem(status: int, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail, **extra})


async def _read_bounded(request: Request, limit: int) -> bytes:
    """The raw body, refusing early on Content-Length and again on the bytes actually sent."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InvalidAlertError("Content-Length is not a number")
        if int(declared) > limit:
            raise _BodyTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
    received = bytearray()
    async for chunk in request.stream():
        received.extend(chunk)
        if len(received) > limit:
            raise _BodyTooLarge(f"body exceeds the limit of {limit} bytes")
    return bytes(received)


def create_app(config: WebhookSettings | None = None, launcher: Launcher | None = None,
               store: DeliveryStore | None = None) -> FastAPI:
    """The webhook app; refuses to build without a secret (OOMRL_WEBHOOK_SECRET)."""
    config = config or WebhookSettings()
    secret = config.required_secret()
    launcher = launcher or launcher_for(config.mode, config.deployment, config.auto_approve)
    store = store or DeliveryStore(config.store_url())
    default_account = get_settings().account
    app = FastAPI(title="oomrl webhook", version="1",
                  description="Signed loss alerts in; one `repair` flow run per alert id out.")
    app.state.store = store
    app.state.config = config

    async def start_repair(autopsy: dict[str, Any], source: str) -> tuple[int, dict[str, Any]]:
        alert_id = str(autopsy["alert_id"])
        earlier = await run_in_threadpool(store.claim, alert_id, autopsy.get("account"), source)
        if earlier is not None:
            return 200, {"alert_id": alert_id, "duplicate": True,
                         "flow_run_id": earlier.flow_run_id, "event_id": earlier.event_id}
        try:
            launched = await launcher.launch(autopsy, alert_id)
        except LaunchError:
            await run_in_threadpool(store.release, alert_id)
            raise
        await run_in_threadpool(store.record, alert_id, launched.flow_run_id, launched.event_id)
        return 202, {"alert_id": alert_id, "duplicate": False, "flow_run_id": launched.flow_run_id,
                     "event_id": launched.event_id, "mode": config.mode}

    def signature_problem(request: Request, raw: bytes) -> JSONResponse | None:
        try:
            verify(raw, secret, request.headers.get(TIMESTAMP_HEADER),
                   request.headers.get(SIGNATURE_HEADER), tolerance_s=config.tolerance_s)
        except SignatureError as exc:
            return _problem(401, str(exc))
        return None

    async def authenticated_body(
            request: Request, check: Callable[[Request, bytes], JSONResponse | None]) -> bytes | JSONResponse:
        """The bounded raw body once `check` accepts it, else the error response (413, 400, 401)."""
        try:
            raw = await _read_bounded(request, config.max_body_bytes)
        except _BodyTooLarge as exc:
            return _problem(413, str(exc))
        except InvalidAlertError as exc:
            return _problem(400, str(exc))
        problem = check(request, raw)
        return raw if problem is None else problem

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "mode": config.mode}

    @app.post("/hooks/loss-alert", status_code=202)
    async def loss_alert(request: Request) -> JSONResponse:
        raw = await authenticated_body(request, signature_problem)
        if isinstance(raw, JSONResponse):
            return raw
        try:
            autopsy = parse_loss_alert(raw)
            status, content = await start_repair(autopsy, "loss-alert")
        except InvalidAlertError as exc:
            return _problem(422, str(exc))
        except LaunchError as exc:
            return _problem(503, str(exc))
        return JSONResponse(status_code=status, content=content)

    def alertmanager_auth_problem(request: Request, raw: bytes) -> JSONResponse | None:
        """Alertmanager cannot sign bodies, so a bearer token also works here (when configured)."""
        auth = request.headers.get("authorization", "")
        token = config.alertmanager_token
        if token and auth.lower().startswith("bearer "):
            given = auth[7:].strip().encode()
            if hmac.compare_digest(given, token.encode()):
                return None
            return _problem(401, "bearer token does not match OOMRL_WEBHOOK_ALERTMANAGER_TOKEN")
        return signature_problem(request, raw)

    @app.post("/hooks/alertmanager", status_code=202)
    async def alertmanager(request: Request) -> JSONResponse:
        raw = await authenticated_body(request, alertmanager_auth_problem)
        if isinstance(raw, JSONResponse):
            return raw
        try:
            notification = parse_alertmanager(raw)
            firing = [autopsy_from_alertmanager(alert, default_account)
                      for alert in notification.alerts if alert.status == "firing"]
            results = []
            for autopsy in firing:
                _, content = await start_repair(autopsy, "alertmanager")
                results.append(content)
        except InvalidAlertError as exc:
            return _problem(422, str(exc))
        except LaunchError as exc:
            return _problem(503, str(exc))
        started = any(not item["duplicate"] for item in results)
        return JSONResponse(status_code=202 if started else 200,
                            content={"alerts": results, "ignored_resolved":
                                     len(notification.alerts) - len(firing)})

    return app


def serve(host: str = "127.0.0.1", port: int = 8765, config: WebhookSettings | None = None) -> None:
    """Run the webhook with uvicorn until interrupted (builds the app first, so bad config fails fast)."""
    import uvicorn

    uvicorn.run(create_app(config), host=host, port=port, log_level="info")
