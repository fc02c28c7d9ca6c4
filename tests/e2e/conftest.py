"""One real stack for the end-to-end suite: Prefect server (SQLite, or PostgreSQL when
OOMRL_TEST_POSTGRES_URL is set), the oomrl-local pool and a worker, prefect.yaml deployed, the
webhook."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from oomrl.webhook.signing import sign
from orchestration.stack import (
    StackConfig,
    down,
    free_port,
    record_pid,
    stack_env,
    start_process,
    start_worker,
    stop_process,
    up,
    wait_http,
    webhook_argv,
)

FINAL_STATES = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
REPO = Path(__file__).resolve().parents[2]


def _fresh_postgres_database(url: str) -> tuple[str, Callable[[], None]]:
    """CREATE a database of our own on the server of `url`; returns its asyncpg URL and a
    dropper."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    admin_url = make_url(url).set(drivername="postgresql+psycopg2")
    name = f"oomrl_e2e_{secrets.token_hex(4)}"
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()

    server_url = admin_url.set(drivername="postgresql+asyncpg", database=name)
    return server_url.render_as_string(hide_password=False), drop


class PoliteClient(httpx.Client):
    """An API client that waits and retries when the server answers 503 (a busy SQLite database)."""

    def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:  # type: ignore[override]
        for attempt in range(8):
            response = super().send(request, **kwargs)
            if response.status_code != 503:
                return response
            response.close()
            time.sleep(min(0.5 * 2**attempt, 8.0))
        return super().send(request, **kwargs)


@dataclass
class Stack:
    """The running stack and helpers to talk to it over HTTP (never through in-process Prefect)."""

    config: StackConfig
    secret: str
    pids: dict[str, int]
    env: dict[str, str]
    api: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.api = PoliteClient(base_url=self.config.api_url, timeout=30)

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One API request (the PoliteClient waits out 503s), checked."""
        response = self.api.request(method, path, **kwargs)
        response.raise_for_status()
        return response

    def post_signed(
        self, path: str, body: bytes, *, secret: str | None = None, timestamp: int | None = None
    ) -> httpx.Response:
        headers = {
            "Content-Type": "application/json",
            **sign(body, secret or self.secret, timestamp),
        }
        return httpx.post(
            f"{self.config.webhook_url}{path}", content=body, headers=headers, timeout=60
        )

    def flow_run_count(self) -> int:
        return int(self.api.post("/flow_runs/count", json={}).json())

    def flow_runs(self, deployment: str | None = None) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"sort": "START_TIME_DESC", "limit": 200}
        if deployment:
            found = self.deployment(deployment)
            body["deployments"] = {"id": {"any_": [found["id"]]}}
        return list(self.call("POST", "/flow_runs/filter", json=body).json())

    def deployment(self, full_name: str) -> dict[str, Any]:
        flow_name, name = full_name.split("/")
        response = self.api.get(f"/deployments/name/{flow_name}/{name}")
        response.raise_for_status()
        return dict(response.json())

    def deployments(self) -> list[dict[str, Any]]:
        return list(self.api.post("/deployments/filter", json={}).json())

    def flow_run(self, run_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/flow_runs/{run_id}").json())

    def wait_for(
        self, run_id: str, states: set[str] = FINAL_STATES, timeout_s: float = 180
    ) -> dict[str, Any]:
        """Poll until the run reaches one of `states`; fail with the worker log's tail otherwise."""
        deadline = time.monotonic() + timeout_s
        run = self.flow_run(run_id)
        while time.monotonic() < deadline:
            run = self.flow_run(run_id)
            if run["state_type"] in states:
                return run
            time.sleep(0.5)
        from orchestration.stack import log_tail

        pytest.fail(
            f"flow run {run_id} is {run['state_type']} after {timeout_s:.0f} s; worker log:\n"
            f"{log_tail(self.config, 'worker', 60)}"
        )

    def resume(self, run_id: str, answer: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        """Answer a paused run's form as the UI does, once the form exists: Prefect sets Paused
        before the paused flow stores its input schema, and a resume in between is refused ("Run
        input schema not found")."""
        deadline = time.monotonic() + timeout_s
        while True:
            keyset = self.flow_run(run_id)["state"]["state_details"].get("run_input_keyset") or {}
            schema = keyset.get("schema")
            if schema and self.api.get(f"/flow_runs/{run_id}/input/{schema}").status_code == 200:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"flow run {run_id} stored no input form within {timeout_s:.0f} s")
            time.sleep(0.5)
        response = self.api.post(f"/flow_runs/{run_id}/resume", json={"run_input": answer})
        assert response.status_code < 300 and response.json().get("status") == "ACCEPT", (
            response.text
        )
        return dict(response.json())

    def restart_worker(self) -> int:
        self.pids["worker"] = start_worker(self.config, self.env)
        record_pid(self.config.home, "worker", self.pids["worker"])
        return self.pids["worker"]

    def kill_worker(self, running_flow_run: str | None = None, timeout_s: float = 120) -> list[int]:
        """SIGKILL the worker and every process under it (its flow runs), like a machine dying;
        with `running_flow_run`, first wait until the worker has spawned that run's process."""
        import psutil

        def runs(process: psutil.Process) -> bool:
            try:
                return process.environ().get("PREFECT__FLOW_RUN_ID") == running_flow_run
            except psutil.Error:
                return False

        worker = psutil.Process(self.pids.pop("worker"))
        deadline = time.monotonic() + timeout_s
        while running_flow_run and time.monotonic() < deadline:
            if any(runs(child) for child in worker.children(recursive=True)):
                break
            time.sleep(0.05)
        victims = [worker, *worker.children(recursive=True)]
        for process in victims:
            with suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(victims, timeout=10)
        return [process.pid for process in victims]

    def set_state(self, run_id: str, state_type: str, name: str, message: str = "") -> None:
        body = {"state": {"type": state_type, "name": name, "message": message}, "force": True}
        self.api.post(f"/flow_runs/{run_id}/set_state", json=body).raise_for_status()

    @contextmanager
    def webhook(self, **env: str) -> Iterator[str]:
        """Another webhook next to the stack's, with `env` on top of the stack's environment; its
        URL."""
        from dataclasses import replace

        config = replace(self.config, webhook_port=free_port())
        name = f"webhook-{config.webhook_port}"
        pid = start_process(name, webhook_argv(config), {**self.env, **env}, config)
        try:
            wait_http(f"{config.webhook_url}/healthz", pid, name, 60, config)
            yield config.webhook_url
        finally:
            stop_process(pid)

    def run_deployment(self, full_name: str, parameters: dict[str, Any]) -> str:
        found = self.deployment(full_name)
        response = self.call(
            "POST", f"/deployments/{found['id']}/create_flow_run", json={"parameters": parameters}
        )
        return str(response.json()["id"])


AUTOPSY = REPO / "tests" / "fixtures" / "ops" / "autopsy.json"
FIRST_MODULE = "test_chain.py"
# A stack start-up and flow runs on a loaded machine; the suite's default is 600 s
E2E_TIMEOUT_S = 1200


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The daily chain's test first: the chain marks (and diagnoses) every active account in the
    shared stack, so it must run before the other modules open accounts of their own. Tests that
    kill the worker come last, after a check of a pause held since early on. End-to-end
    tests wait on real servers: a longer time limit, unless a test sets its own."""
    for item in items:
        if item.get_closest_marker("e2e") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))
    e2e = [i for i, item in enumerate(items) if item.path.parent == Path(__file__).parent]
    if not e2e:
        return
    first = [
        item
        for item in items
        if item.path.name == FIRST_MODULE and item.path.parent == Path(__file__).parent
    ]
    ours = [items[i] for i in e2e if items[i] not in first]
    after = [item for item in items[e2e[0] :] if item not in first and item not in ours]
    # A held pause checked late overlaps the other e2e tests' work; killing the worker ends every
    # run under it, the held one too, so those tests come after the check.
    late = [item for item in ours if item.get_closest_marker("after_long_hold")]
    killers = [item for item in ours if item.get_closest_marker("kills_worker")]
    middle = [item for item in ours if item not in late and item not in killers]
    items[e2e[0] :] = first + middle + late + killers + after


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Start everything once for the session; stop it and drop the database afterwards."""
    home = tmp_path_factory.mktemp("e2e") / "home"
    postgres = os.environ.get("OOMRL_TEST_POSTGRES_URL")
    database_url, drop = _fresh_postgres_database(postgres) if postgres else (None, lambda: None)
    secret = "e2e-" + secrets.token_hex(24)
    config = StackConfig(
        home=home,
        port=free_port(),
        webhook_port=free_port(),
        database_url=database_url,
        project_dir=REPO,
        extra_env={
            "OOMRL_WEBHOOK_SECRET": secret,
            "OOMRL_WEBHOOK_AUTO_APPROVE": "true",
            "OOMRL_WEBHOOK_MAX_BODY_BYTES": "65536",
            "OOMRL_LLM_PROVIDER": "offline",
            "PREFECT_LOGGING_LEVEL": "INFO",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            "PREFECT_WORKER_PREFETCH_SECONDS": "1",
            # The schedules are deployed active; their runs are not created here, so a suite running
            # at 16:30 Shanghai time never meets a scheduled chain marking its accounts.
            "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
            # The shared stack holds the whole sample (its tests name sessions up to 2026-02-27);
            # the day-one stack of test_day_one.py plays it forward from `oomrl server up`'s
            # default.
            "OOMRL_SAMPLE_CLOCK": "off",
        },
    )
    try:
        state = up(config, say=lambda line: print(f"[e2e] {line}"))
        running = Stack(config, secret, dict(state["pids"]), stack_env(config))  # type: ignore[arg-type]
        with running.api:  # closes its connections to the server before the server stops
            yield running
    finally:
        down(home, say=lambda line: print(f"[e2e] {line}"))
        drop()


@pytest.fixture(scope="session")
def alert_account(stack: Stack) -> str:
    """The fixture autopsy's account, opened in the stack's ledger (the webhook refuses unknown
    accounts)."""
    import json

    from oomrl.portfolio.service import open_ledger
    from oomrl.settings import get_settings

    account = str(json.loads(AUTOPSY.read_text())["account"])
    open_ledger(get_settings(store={"home": stack.config.home})).open_account(account, 10_000_000)
    return account


@pytest.fixture(scope="session")
def completed_repair(stack: Stack, alert_account: str) -> dict[str, Any]:
    """A correctly signed loss alert posted to the webhook, and the `repair` run it started,
    finished."""
    import json

    autopsy = json.loads(AUTOPSY.read_text())
    autopsy["alert_id"] = f"e2e-{secrets.token_hex(6)}"
    body = json.dumps(autopsy).encode()
    response = stack.post_signed("/hooks/loss-alert", body)
    assert response.status_code == 202, response.text
    run = stack.wait_for(response.json()["flow_run_id"], timeout_s=240)
    return {"response": response.json(), "run": run, "body": body, "autopsy": autopsy}
