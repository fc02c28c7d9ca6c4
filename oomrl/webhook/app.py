"""The FastAPI webhook: signed loss alerts start exactly one repair each, through the repair's own
door.

Status codes: 202 started; 200 duplicate (the alert's run exists, is alive or ended as it should);
400 a broken Content-Length; 401 bad signature or token; 413 oversized; 422 anything that is not a
full autopsy or a loss alert for a known account and strategy (hostile JSON included); 503 the
repair could not be started now (Prefect or the ledger unavailable) — the sender should retry.
Refusals are logged.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from oomrl.diagnostics.autopsy import RepairInput
from oomrl.errors import user_message
from oomrl.repair_claims import CLAIM_SILENT_S, ClaimBook
from oomrl.repair_inputs import InvalidAutopsyError, check_known, load_autopsy, parse_json
from oomrl.settings import OomrlSettings, WebhookSettings, get_settings, webhook_settings
from oomrl.webhook.alerts import (
    AlertmanagerAlert,
    InvalidAlertError,
    alertmanager_alert_id,
    autopsy_from_alertmanager,
    parse_alertmanager,
)
from oomrl.webhook.deliveries import Delivery, DeliveryStore
from oomrl.webhook.launch import API_TIMEOUT_S, BUSY_RETRIES_S, Launcher, LaunchError, RunStatus
from oomrl.webhook.reports import reports_router
from oomrl.webhook.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, SignatureError, verify

logger = logging.getLogger(__name__)
# Prefect states after which a re-delivered alert starts a new run (the first one did not finish).
RELAUNCH_STATES = frozenset({"CRASHED", "FAILED", "CANCELLED"})
# States of a run that may have lost its process (worker SIGKILLed): its claim heartbeat decides.
LIVE_STATES = frozenset({"PENDING", "RUNNING", "PAUSED"})
# A launch makes two Prefect calls of at most API_TIMEOUT_S each (plus its pauses while Prefect is
# busy); a claim older than that is orphaned.
LAUNCH_WAIT = timedelta(seconds=2 * API_TIMEOUT_S + sum(BUSY_RETRIES_S) + 5)
POLL_S = 0.1
RATE_WINDOW_S = 60.0  # OOMRL_WEBHOOK_MAX_RUNS_PER_MINUTE counts the runs started in this window
ASCII_DIGITS = re.compile(r"[0-9]{1,20}")


class _BodyTooLarge(Exception):
    """The request body exceeds the configured limit."""


class _Refused(Exception):
    """A request (or one alert of it) refused with a status and a reason (logged)."""

    def __init__(self, status: int, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.retry_after = status, detail, retry_after


def _log_refusal(request: Request, status: int, detail: str) -> None:
    client = request.client.host if request.client else "?"
    logger.warning(
        "%s %s from %s refused with %d: %s",
        request.method,
        request.url.path,
        client,
        status,
        detail[:500],
    )


def _refusal(
    request: Request, status: int, detail: str, retry_after: int | None = None
) -> JSONResponse:
    _log_refusal(request, status, detail)
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)


def overall_status(results: list[dict[str, Any]]) -> int:
    """One answer for a notification's alerts: retry (503) if any could not be started now, else
    202 if any started, 429 if any was over its account's rate, 422 if every one was refused, else
    200 (duplicates, or refusals beside them)."""
    statuses = {item["status"] for item in results}
    for status in (503, 202, 429):
        if status in statuses:
            return status
    return 422 if statuses == {422} else 200


async def _read_bounded(request: Request, limit: int) -> bytes:
    """The raw body, refusing early on Content-Length and again on the bytes actually sent."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not ASCII_DIGITS.fullmatch(
            declared.strip()
        ):  # isdigit() also takes "²", which int() refuses
            raise InvalidAlertError("Content-Length is not a number")
        if int(declared) > limit:
            raise _BodyTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
    received = bytearray()
    async for chunk in request.stream():
        received.extend(chunk)
        if len(received) > limit:
            raise _BodyTooLarge(f"body exceeds the limit of {limit} bytes")
    return bytes(received)


def create_app(
    config: WebhookSettings | None,
    launcher: Launcher,
    store: DeliveryStore | None = None,
    settings: OomrlSettings | None = None,
) -> FastAPI:
    """The webhook app; refuses to build without a secret (OOMRL_WEBHOOK_SECRET). Its launcher
    comes from outside (orchestration/launch.py talks to Prefect); `config` None reads the
    environment."""
    config = config or webhook_settings()
    secret = config.required_secret()
    token = config.required_token()
    settings = settings or get_settings()
    store = store or DeliveryStore(config.store_url(settings.ledger))
    app = FastAPI(
        title="oomrl webhook",
        version="1",
        description="Signed loss alerts in; one `repair` flow run per alert id out.",
    )
    app.state.store = store
    app.state.config = config
    app.include_router(reports_router(settings.runs_dir, secret))  # read-only report files

    async def admit(data: Any) -> RepairInput:
        """The repair's door: a full autopsy or a loss alert, for an account and strategy that
        exist."""
        try:
            checked = load_autopsy(data)
            await run_in_threadpool(check_known, checked, settings.ledger, settings.workspace_dir)
        except InvalidAutopsyError as exc:
            raise _Refused(422, str(exc)) from None
        except Exception as exc:  # the ledger is unreachable: not the sender's fault, retry later
            raise LaunchError(
                f"cannot check the alert against the ledger: {type(exc).__name__}: {exc}"
            ) from exc
        return checked

    async def launch_claimed(
        autopsy: RepairInput, alert_id: str, after: str | None
    ) -> tuple[int, dict[str, Any]]:
        try:
            launched = await launcher.launch(autopsy, alert_id, attempt=after)
        except Exception as exc:
            await run_in_threadpool(store.release, alert_id)
            if isinstance(exc, LaunchError):
                raise
            raise LaunchError(f"could not start the repair: {type(exc).__name__}: {exc}") from exc
        await run_in_threadpool(store.record, alert_id, launched.flow_run_id, launched.event_id)
        content = {
            "alert_id": alert_id,
            "duplicate": False,
            "flow_run_id": launched.flow_run_id,
            "event_id": launched.event_id,
            "mode": config.mode,
        }
        return 202, {**content, "replaces": after} if after else content

    async def wait_for_launch(alert_id: str) -> Delivery | None:
        """Wait while another delivery starts this alert's run; None when this one may start it."""
        if await run_in_threadpool(store.take_over, alert_id, LAUNCH_WAIT):
            return None  # its owner died mid-launch
        deadline = time.monotonic() + LAUNCH_WAIT.total_seconds()
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            latest = await run_in_threadpool(store.get, alert_id)
            if latest is None:
                raise LaunchError(
                    f"starting the repair of alert {alert_id} failed; retry the delivery"
                )
            if not latest.pending:
                return latest
        raise LaunchError(
            f"the repair of alert {alert_id} is still being started; retry the delivery"
        )

    claims: list[
        ClaimBook
    ] = []  # opened on first use: an unreachable ledger is a 503, not a dead webhook

    def claim_book() -> ClaimBook:
        try:
            if not claims:
                claims.append(ClaimBook(settings.ledger).create())
        except Exception as exc:
            raise LaunchError(
                f"cannot read the repair claims in the ledger: {type(exc).__name__}: {exc}"
            ) from exc
        return claims[0]

    def silent(flow_run_id: str, status: RunStatus) -> bool:
        """A live-looking run whose claim has not beaten for CLAIM_SILENT_S (or that never beat)."""
        book = claim_book()
        try:
            claim = book.get(flow_run_id)
        except Exception as exc:
            raise LaunchError(
                f"cannot read the repair claims in the ledger: {type(exc).__name__}: {exc}"
            ) from exc
        if claim is not None:
            return claim.gone(CLAIM_SILENT_S)
        now = datetime.now(UTC).replace(tzinfo=None)  # no row: the process never got far or is gone
        return status.since is not None and status.since < now - timedelta(seconds=CLAIM_SILENT_S)

    def running_repairs() -> int:
        book = claim_book()
        try:
            return len(book.live())
        except Exception as exc:
            raise LaunchError(
                f"cannot read the repair claims in the ledger: {type(exc).__name__}: {exc}"
            ) from exc

    async def check_floods(account: str, counted: int) -> None:
        """The flood limits before a run starts: `account`'s runs this minute (`counted`: whether
        its own claim is among them already) and the repairs running on every path."""
        recent = await run_in_threadpool(store.recent, account, RATE_WINDOW_S)
        if recent - counted >= config.max_runs_per_minute:
            raise _Refused(
                429,
                f"account {account} started {recent - counted} repair run(s) in the last "
                f"{RATE_WINDOW_S:.0f} s, the most OOMRL_WEBHOOK_MAX_RUNS_PER_MINUTE="
                f"{config.max_runs_per_minute} allows; retry later",
                int(RATE_WINDOW_S),
            )
        running = await run_in_threadpool(running_repairs)
        if running >= settings.repair_max_running:
            raise _Refused(
                503,
                f"{running} repairs are running, the most OOMRL_REPAIR_MAX_RUNNING="
                f"{settings.repair_max_running} allows; retry the delivery later",
                int(CLAIM_SILENT_S),
            )

    async def ended_or_gone(flow_run_id: str) -> bool:
        """Whether a re-delivery should start the alert's repair again: its run crashed, failed, was
        cancelled, is gone from Prefect (deleted, or another server's), or went silent (then it is
        marked Crashed, so the runs list says so too)."""
        status = await launcher.run_state(flow_run_id)
        if status is None:
            return True
        if status.type in RELAUNCH_STATES:
            return True
        if status.type in LIVE_STATES and await run_in_threadpool(silent, flow_run_id, status):
            await launcher.mark_crashed(
                flow_run_id,
                f"no heartbeat for {CLAIM_SILENT_S:.0f} s: its process is "
                "gone; the alert was delivered again",
            )
            return True
        return False

    async def start_repair(autopsy: RepairInput, source: str) -> tuple[int, dict[str, Any]]:
        alert_id, after, account = autopsy.alert_id, None, autopsy.account
        earlier = await run_in_threadpool(store.claim, alert_id, account, source)
        if earlier is None:  # a new alert: its claim counts with the others, strict under a flood
            try:
                await check_floods(account, counted=1)
            except _Refused:
                await run_in_threadpool(store.release, alert_id)
                raise
        while earlier is not None:
            if earlier.pending:
                earlier = await wait_for_launch(alert_id)
                continue
            if earlier.flow_run_id and await ended_or_gone(earlier.flow_run_id):
                await check_floods(account, counted=0)  # before the row changes: nothing to undo
                if await run_in_threadpool(store.reopen, alert_id, earlier.flow_run_id):
                    after, earlier = earlier.flow_run_id, None
                    continue
                earlier = await wait_for_launch(alert_id)  # another delivery is relaunching it
                continue
            return 200, {
                "alert_id": alert_id,
                "duplicate": True,
                "flow_run_id": earlier.flow_run_id,
                "event_id": earlier.event_id,
            }
        return await launch_claimed(autopsy, alert_id, after)

    def signature_problem(request: Request, raw: bytes) -> str | None:
        try:
            verify(
                raw,
                secret,
                request.headers.get(TIMESTAMP_HEADER),
                request.headers.get(SIGNATURE_HEADER),
                tolerance_s=config.tolerance_s,
            )
        except SignatureError as exc:
            return str(exc)
        return None

    def alertmanager_auth_problem(request: Request, raw: bytes) -> str | None:
        """Alertmanager cannot sign bodies, so a bearer token also works here (when configured)."""
        auth = request.headers.get("authorization", "")
        if token and auth.lower().startswith("bearer "):
            given = auth[7:].strip().encode()
            if hmac.compare_digest(given, token.encode()):
                return None
            return "bearer token does not match OOMRL_WEBHOOK_ALERTMANAGER_TOKEN"
        return signature_problem(request, raw)

    async def authenticated_body(
        request: Request, check: Callable[[Request, bytes], str | None]
    ) -> bytes:
        """The bounded raw body once `check` accepts it; _Refused with 413, 400 or 401 otherwise."""
        try:
            raw = await _read_bounded(request, config.max_body_bytes)
        except _BodyTooLarge as exc:
            raise _Refused(413, str(exc)) from None
        except InvalidAlertError as exc:
            raise _Refused(400, str(exc)) from None
        problem = check(request, raw)
        if problem is not None:
            raise _Refused(401, problem)
        return raw

    async def answer(request: Request, handle: Callable[[], Any]) -> JSONResponse:
        """Run a route body; refusals and launch failures become their status, logged."""
        try:
            status, content = await handle()
        except _Refused as exc:
            return _refusal(request, exc.status, exc.detail, exc.retry_after)
        except InvalidAlertError as exc:
            return _refusal(request, 422, str(exc))
        except LaunchError as exc:
            return _refusal(request, 503, str(exc))
        except (
            SQLAlchemyError
        ) as exc:  # the delivery store's database failed under us: not the sender's fault
            return _refusal(
                request, 503, f"cannot record the delivery: {user_message(exc)}; retry the delivery"
            )
        return JSONResponse(status_code=status, content=content)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "mode": config.mode}

    @app.post("/hooks/loss-alert", status_code=202)
    async def loss_alert(request: Request) -> JSONResponse:
        async def handle() -> tuple[int, dict[str, Any]]:
            raw = await authenticated_body(request, signature_problem)
            try:
                data = parse_json(raw, "body", limit=config.max_body_bytes)
            except InvalidAutopsyError as exc:
                raise _Refused(422, str(exc)) from None
            return await start_repair(await admit(data), "loss-alert")

        return await answer(request, handle)

    async def one_alert(request: Request, alert: AlertmanagerAlert) -> dict[str, Any]:
        """One firing alert of a notification through the door: started, duplicate, or refused alone
        with its status and reason (the others go on)."""
        alert_id = alertmanager_alert_id(alert)
        try:
            status, content = await start_repair(
                await admit(autopsy_from_alertmanager(alert, settings.account)), "alertmanager"
            )
        except _Refused as exc:
            status, detail = exc.status, exc.detail
        except InvalidAlertError as exc:
            status, detail = 422, str(exc)
        except LaunchError as exc:
            status, detail = 503, str(exc)
        else:
            return {**content, "status": status}
        _log_refusal(request, status, f"alert {alert_id}: {detail}")
        return {"alert_id": alert_id, "status": status, "refused": detail}

    @app.post("/hooks/alertmanager", status_code=202)
    async def alertmanager(request: Request) -> JSONResponse:
        async def handle() -> tuple[int, dict[str, Any]]:
            raw = await authenticated_body(request, alertmanager_auth_problem)
            notification = parse_alertmanager(raw)
            firing = [alert for alert in notification.alerts if alert.status == "firing"]
            if len(firing) > config.max_alerts:
                raise _Refused(
                    413,
                    f"the notification carries {len(firing)} firing alerts, more than "
                    f"OOMRL_WEBHOOK_MAX_ALERTS={config.max_alerts}; set `max_alerts: "
                    f"{config.max_alerts}` in Alertmanager's webhook_config",
                )
            results = [await one_alert(request, alert) for alert in firing]
            status = overall_status(results)
            content: dict[str, Any] = {
                "alerts": results,
                "ignored_resolved": len(notification.alerts) - len(firing),
            }
            if status >= 400:  # what to fix (or wait for), in one line as every refusal has
                content["detail"] = "; ".join(
                    f"alert {r['alert_id']}: {r['refused']}" for r in results if "refused" in r
                )
            return status, content

        return await answer(request, handle)

    return app
