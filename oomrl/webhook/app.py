"""The FastAPI webhook: signed loss alerts start one repair each, through the repair's own door.

Status codes:
- 202 started.
- 200 duplicate (the alert's run exists, is alive or ended as it should).
- 400 a broken Content-Length.
- 401 bad signature or token.
- 413 oversized.
- 422 anything but a full autopsy or a loss alert for a known account and strategy. Hostile JSON
  is included.
- 503 the repair could not be started now (Prefect or the ledger unavailable). The sender should
  retry.
Refusals are logged.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from oomrl.diagnostics.autopsy import RepairInput
from oomrl.errors import (
    InvalidAlertError,
    InvalidAutopsyError,
    LaunchError,
    SignatureError,
    user_message,
)
from oomrl.repair.claims import CLAIM_SILENT_S, ClaimBook
from oomrl.repair.inputs import check_known, load_autopsy, parse_json
from oomrl.settings import OomrlSettings, WebhookSettings, get_settings, webhook_settings
from oomrl.webhook.alerts import (
    AlertmanagerAlert,
    alertmanager_alert_id,
    autopsy_from_alertmanager,
    parse_alertmanager,
)
from oomrl.webhook.deliveries import Delivery, DeliveryStore
from oomrl.webhook.launch import API_TIMEOUT_S, BUSY_RETRIES_S, Launcher, RunStatus
from oomrl.webhook.reports import reports_router
from oomrl.webhook.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify

logger = logging.getLogger(__name__)
# Prefect states after which a re-delivered alert starts a new run.
# The first one did not finish.
RELAUNCH_STATES = frozenset({"CRASHED", "FAILED", "CANCELLED"})
# States of a run that may have lost its process (worker SIGKILLed).
# Its claim heartbeat decides.
LIVE_STATES = frozenset({"PENDING", "RUNNING", "PAUSED"})
# A launch makes two Prefect calls of at most API_TIMEOUT_S each.
# It also pauses while Prefect is busy. A claim older than that is orphaned.
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
    """One answer for a notification's alerts.

    Retry (503) if any could not be started now. Else 202 if any started. Else 429 if any was over
    its account's rate. Else 422 if every one was refused. Else 200 (duplicates, or refusals beside
    them).
    """
    statuses = {item["status"] for item in results}
    for status in (503, 202, 429):
        if status in statuses:
            return status
    return 422 if statuses == {422} else 200


async def _read_bounded(request: Request, limit: int) -> bytes:
    """The raw body, refusing early on Content-Length and again on the bytes actually sent."""
    declared = request.headers.get("content-length")
    if declared is not None:
        # Isdigit() also takes "²", which int() refuses
        if not ASCII_DIGITS.fullmatch(declared.strip()):
            raise InvalidAlertError("Content-Length is not a number")
        if int(declared) > limit:
            raise _BodyTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
    received = bytearray()
    async for chunk in request.stream():
        received.extend(chunk)
        if len(received) > limit:
            raise _BodyTooLarge(f"body exceeds the limit of {limit} bytes")
    return bytes(received)


@contextmanager
def _reading_claims() -> Iterator[None]:
    """Any failure reading the ledger's repair claims, as a LaunchError (a 503: retry later)."""
    try:
        yield
    except Exception as exc:
        raise LaunchError(
            f"cannot read the repair claims in the ledger: {type(exc).__name__}: {exc}"
        ) from exc


async def _answer(
    request: Request, handle: Callable[[], Awaitable[tuple[int, dict[str, Any]]]]
) -> JSONResponse:
    """Run a route body; refusals and launch failures become their status, logged."""
    try:
        status, content = await handle()
    except _Refused as exc:
        return _refusal(request, exc.status, exc.detail, exc.retry_after)
    except InvalidAlertError as exc:
        return _refusal(request, 422, str(exc))
    except LaunchError as exc:
        return _refusal(request, 503, str(exc))
    # The delivery store's database failed under us: not the sender's fault.
    except SQLAlchemyError as exc:
        return _refusal(
            request, 503, f"cannot record the delivery: {user_message(exc)}; retry the delivery"
        )
    return JSONResponse(status_code=status, content=content)


class WebhookIntake:
    """The webhook's behaviour, with its settings, store, launcher and limits; no routes."""

    def __init__(
        self,
        config: WebhookSettings,
        settings: OomrlSettings,
        launcher: Launcher,
        store: DeliveryStore,
        secret: str,
        token: str | None,
    ) -> None:
        self.config, self.settings = config, settings
        self.launcher, self.store = launcher, store
        self.secret, self.token = secret, token
        self._claims: ClaimBook | None = None  # opened on first use: an unreachable ledger is a 503

    def reports(self) -> APIRouter:
        """The read-only report file routes, checked with the webhook's secret."""
        return reports_router(self.settings.store.runs_dir, self.secret)

    async def admit(self, data: Any) -> RepairInput:
        """The repair's door: a full autopsy or a loss alert.

        The account and strategy must exist.
        """
        try:
            checked = load_autopsy(data)
            await run_in_threadpool(
                check_known, checked, self.settings.ledger_url, self.settings.store.workspace_dir
            )
        except InvalidAutopsyError as exc:
            raise _Refused(422, str(exc)) from None
        except Exception as exc:  # the ledger is unreachable: not the sender's fault, retry later
            raise LaunchError(
                f"cannot check the alert against the ledger: {type(exc).__name__}: {exc}"
            ) from exc
        return checked

    async def launch_claimed(
        self, autopsy: RepairInput, alert_id: str, after: str | None
    ) -> tuple[int, dict[str, Any]]:
        """Start the run of a claimed alert (replacing run `after`) and record it; 202."""
        try:
            launched = await self.launcher.launch(autopsy, alert_id, attempt=after)
        except Exception as exc:
            await run_in_threadpool(self.store.release, alert_id)
            if isinstance(exc, LaunchError):
                raise
            raise LaunchError(f"could not start the repair: {type(exc).__name__}: {exc}") from exc
        await run_in_threadpool(
            self.store.record, alert_id, launched.flow_run_id, launched.event_id
        )
        content = {
            "alert_id": alert_id,
            "duplicate": False,
            "flow_run_id": launched.flow_run_id,
            "event_id": launched.event_id,
            "mode": self.config.mode,
        }
        return 202, {**content, "replaces": after} if after else content

    async def wait_for_launch(self, alert_id: str) -> Delivery | None:
        """Wait while another delivery starts this alert's run; None when this one may start it."""
        if await run_in_threadpool(self.store.take_over, alert_id, LAUNCH_WAIT):
            return None  # its owner died mid-launch
        deadline = time.monotonic() + LAUNCH_WAIT.total_seconds()
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            latest = await run_in_threadpool(self.store.get, alert_id)
            if latest is None:
                raise LaunchError(
                    f"starting the repair of alert {alert_id} failed; retry the delivery"
                )
            if not latest.pending:
                return latest
        raise LaunchError(
            f"the repair of alert {alert_id} is still being started; retry the delivery"
        )

    def claim_book(self) -> ClaimBook:
        """The ledger's repair claims, opened on first use."""
        with _reading_claims():
            if self._claims is None:
                self._claims = ClaimBook(self.settings.ledger_url).create()
        return self._claims

    def silent(self, flow_run_id: str, status: RunStatus) -> bool:
        """A live-looking run whose claim has not beaten for CLAIM_SILENT_S (or that never beat)."""
        book = self.claim_book()
        with _reading_claims():
            claim = book.get(flow_run_id)
        if claim is not None:
            return claim.gone(CLAIM_SILENT_S)
        now = datetime.now(UTC).replace(tzinfo=None)  # no row: the process never got far or is gone
        return status.since is not None and status.since < now - timedelta(seconds=CLAIM_SILENT_S)

    def running_repairs(self) -> int:
        """How many repairs hold a live claim, on every path."""
        book = self.claim_book()
        with _reading_claims():
            return len(book.live())

    async def check_floods(self, account: str, counted: int) -> None:
        """The flood limits before a run starts.

        One limit is `account`'s runs this minute. `counted` says whether its own claim is among
        them already. The other is the repairs running on every path.
        """
        recent = await run_in_threadpool(self.store.recent, account, RATE_WINDOW_S)
        most = self.config.max_runs_per_minute
        if recent - counted >= most:
            raise _Refused(
                429,
                f"account {account} started {recent - counted} repair run(s) in the last "
                f"{RATE_WINDOW_S:.0f} s, the most OOMRL_WEBHOOK_MAX_RUNS_PER_MINUTE="
                f"{most} allows; retry later",
                int(RATE_WINDOW_S),
            )
        running = await run_in_threadpool(self.running_repairs)
        if running >= self.settings.agent.repair_max_running:
            raise _Refused(
                503,
                f"{running} repairs are running, the most OOMRL_REPAIR_MAX_RUNNING="
                f"{self.settings.agent.repair_max_running} allows; retry the delivery later",
                int(CLAIM_SILENT_S),
            )

    async def ended_or_gone(self, flow_run_id: str) -> bool:
        """Whether a re-delivery should start the alert's repair again.

        It should when its run crashed, failed or was cancelled. It should when the run is gone from
        Prefect (deleted, or another server's). It should when the run went silent. Then it is
        marked Crashed, so the runs list says so too.
        """
        status = await self.launcher.run_state(flow_run_id)
        if status is None:
            return True
        if status.type in RELAUNCH_STATES:
            return True
        if status.type in LIVE_STATES and await run_in_threadpool(self.silent, flow_run_id, status):
            await self.launcher.mark_crashed(
                flow_run_id,
                f"no heartbeat for {CLAIM_SILENT_S:.0f} s: its process is "
                "gone; the alert was delivered again",
            )
            return True
        return False

    async def claim_new(self, autopsy: RepairInput, source: str) -> Delivery | None:
        """Claim the alert; a new one (None) counts with the others, strict under a flood."""
        earlier = await run_in_threadpool(
            self.store.claim, autopsy.alert_id, autopsy.account, source
        )
        if earlier is None:
            try:
                await self.check_floods(autopsy.account, counted=1)
            except _Refused:
                await run_in_threadpool(self.store.release, autopsy.alert_id)
                raise
        return earlier

    async def start_repair(self, autopsy: RepairInput, source: str) -> tuple[int, dict[str, Any]]:
        """Exactly one run per alert id: 202 started (again, after a crash), or 200 duplicate."""
        alert_id, after, account = autopsy.alert_id, None, autopsy.account
        earlier = await self.claim_new(autopsy, source)
        while earlier is not None:
            if earlier.pending:
                earlier = await self.wait_for_launch(alert_id)
                continue
            if earlier.flow_run_id and await self.ended_or_gone(earlier.flow_run_id):
                # Before the row changes: nothing to undo
                await self.check_floods(account, counted=0)
                if await run_in_threadpool(self.store.reopen, alert_id, earlier.flow_run_id):
                    after, earlier = earlier.flow_run_id, None
                    continue
                earlier = await self.wait_for_launch(alert_id)  # another delivery is relaunching it
                continue
            return 200, {
                "alert_id": alert_id,
                "duplicate": True,
                "flow_run_id": earlier.flow_run_id,
                "event_id": earlier.event_id,
            }
        return await self.launch_claimed(autopsy, alert_id, after)

    def signature_problem(self, request: Request, raw: bytes) -> str | None:
        """Why the body's HMAC signature does not verify, or None."""
        try:
            verify(
                raw,
                self.secret,
                request.headers.get(TIMESTAMP_HEADER),
                request.headers.get(SIGNATURE_HEADER),
                tolerance_s=self.config.tolerance_s,
            )
        except SignatureError as exc:
            return str(exc)
        return None

    def alertmanager_auth_problem(self, request: Request, raw: bytes) -> str | None:
        """Alertmanager cannot sign bodies, so a bearer token also works here (when configured)."""
        auth = request.headers.get("authorization", "")
        if self.token and auth.lower().startswith("bearer "):
            given = auth[7:].strip().encode()
            if hmac.compare_digest(given, self.token.encode()):
                return None
            return "bearer token does not match OOMRL_WEBHOOK_ALERTMANAGER_TOKEN"
        return self.signature_problem(request, raw)

    async def authenticated_body(
        self, request: Request, check: Callable[[Request, bytes], str | None]
    ) -> bytes:
        """The bounded raw body once `check` accepts it; _Refused with 413, 400 or 401 otherwise."""
        try:
            raw = await _read_bounded(request, self.config.max_body_bytes)
        except _BodyTooLarge as exc:
            raise _Refused(413, str(exc)) from None
        except InvalidAlertError as exc:
            raise _Refused(400, str(exc)) from None
        problem = check(request, raw)
        if problem is not None:
            raise _Refused(401, problem)
        return raw

    async def healthz(self) -> dict[str, str]:
        """GET /healthz: alive, and in which mode."""
        return {"status": "ok", "mode": self.config.mode}

    async def loss_alert(self, request: Request) -> JSONResponse:
        """POST /hooks/loss-alert: one signed loss alert or full autopsy."""
        return await _answer(request, lambda: self.handle_loss_alert(request))

    async def handle_loss_alert(self, request: Request) -> tuple[int, dict[str, Any]]:
        """A signed loss alert's status and answer; refusals raise."""
        raw = await self.authenticated_body(request, self.signature_problem)
        try:
            data = parse_json(raw, "body", limit=self.config.max_body_bytes)
        except InvalidAutopsyError as exc:
            raise _Refused(422, str(exc)) from None
        return await self.start_repair(await self.admit(data), "loss-alert")

    async def one_alert(self, request: Request, alert: AlertmanagerAlert) -> dict[str, Any]:
        """One firing alert of a notification through the door.

        It is started, duplicate, or refused alone with its status and reason. The others go on.
        """
        alert_id = alertmanager_alert_id(alert)
        try:
            status, content = await self.start_repair(
                await self.admit(autopsy_from_alertmanager(alert, self.settings.ledger.account)),
                "alertmanager",
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

    async def alertmanager(self, request: Request) -> JSONResponse:
        """POST /hooks/alertmanager: a notification's firing alerts, each through the door."""
        return await _answer(request, lambda: self.handle_alertmanager(request))

    async def handle_alertmanager(self, request: Request) -> tuple[int, dict[str, Any]]:
        """A notification's overall status and per-alert answers; refusals of the whole raise."""
        raw = await self.authenticated_body(request, self.alertmanager_auth_problem)
        notification = parse_alertmanager(raw)
        firing = [alert for alert in notification.alerts if alert.status == "firing"]
        most = self.config.max_alerts
        if len(firing) > most:
            raise _Refused(
                413,
                f"the notification carries {len(firing)} firing alerts, more than "
                f"OOMRL_WEBHOOK_MAX_ALERTS={most}; set `max_alerts: "
                f"{most}` in Alertmanager's webhook_config",
            )
        results = [await self.one_alert(request, alert) for alert in firing]
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
    store = store or DeliveryStore(config.store_url(settings.ledger_url))
    intake = WebhookIntake(config, settings, launcher, store, secret, token)
    app = FastAPI(
        title="oomrl webhook",
        version="1",
        description="Signed loss alerts in; one `repair` flow run per alert id out.",
    )
    app.state.store = store
    app.state.config = config
    app.state.intake = intake
    app.include_router(intake.reports())  # read-only report files
    app.get("/healthz")(intake.healthz)
    app.post("/hooks/loss-alert", status_code=202)(intake.loss_alert)
    app.post("/hooks/alertmanager", status_code=202)(intake.alertmanager)
    return app
