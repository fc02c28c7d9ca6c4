"""The local stack supervisor: configuration, secrets, process control, state file, failure clean-up."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomrl.cli import app
from oomrl.server import (
    StackConfig,
    StackError,
    alive,
    down,
    free_port,
    read_state,
    stack_env,
    stop_process,
    up,
    webhook_secret,
)


def test_config_urls_and_default_database(tmp_path: Path) -> None:
    config = StackConfig(home=tmp_path, port=4321, webhook_port=9999)
    assert config.api_url == "http://127.0.0.1:4321/api" and config.ui_url == "http://127.0.0.1:4321"
    assert config.webhook_url == "http://127.0.0.1:9999"
    assert config.database == f"sqlite+aiosqlite:///{tmp_path / 'prefect' / 'prefect.db'}"
    assert StackConfig(home=tmp_path, database_url="postgresql+asyncpg://u@h/db").database.endswith("/db")


def test_generated_secret_is_private_and_stable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OOMRL_WEBHOOK_SECRET", raising=False)
    first = webhook_secret(tmp_path)
    assert len(first) == 64 and webhook_secret(tmp_path) == first
    assert stat.S_IMODE((tmp_path / "webhook.secret").stat().st_mode) == 0o600
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "from-the-environment-123")
    assert webhook_secret(tmp_path) == "from-the-environment-123"


def test_stack_env_points_every_child_at_one_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    env = stack_env(StackConfig(home=tmp_path, port=4555, extra_env={"EXTRA": "1"}))
    assert env["PREFECT_API_URL"] == "http://127.0.0.1:4555/api"
    assert env["OOMRL_HOME"] == str(tmp_path) and env["PREFECT_HOME"] == str(tmp_path / "prefect")
    assert env["EXTRA"] == "1" and env["OOMRL_WEBHOOK_SECRET"] == "s" * 32


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    assert 1024 < port < 65536
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        assert sock.getsockname() == ("127.0.0.1", port)


def test_stop_process_ends_the_group(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    assert alive(child.pid)
    stop_process(child.pid, grace_s=5)
    assert not alive(child.pid)
    stop_process(child.pid)  # already gone: no error


def test_stop_process_kills_what_ignores_sigterm() -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
    stop_process(child.pid, grace_s=0.5)
    assert not alive(child.pid)


def test_failed_start_cleans_up_and_shows_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that dies at once (invalid Prefect setting) fails `up` with its log, no state left."""
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    config = StackConfig(home=tmp_path / "home", port=free_port(),
                         extra_env={"PREFECT_LOGGING_LEVEL": "NOT-A-LEVEL"})
    with pytest.raises(StackError, match="server"):
        up(config, say=lambda _: None)
    assert read_state(config.home) is None
    assert (config.log_dir / "server.log").exists()


def test_up_needs_prefect_yaml_to_deploy(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="no prefect.yaml"):
        up(StackConfig(home=tmp_path / "home", project_dir=tmp_path), say=lambda _: None)
    assert not (tmp_path / "home").exists()


def test_up_refuses_when_already_running(tmp_path: Path) -> None:
    (tmp_path / "server.json").write_text(json.dumps({"pids": {"server": os.getpid()}}))
    with pytest.raises(StackError, match="already running"):
        up(StackConfig(home=tmp_path), say=lambda _: None)


def test_down_stops_recorded_processes(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    (tmp_path / "server.json").write_text(json.dumps({"pids": {"worker": child.pid, "server": 2 ** 22 + 7}}))
    said: list[str] = []
    assert down(tmp_path, say=said.append) == ["worker", "server"]
    assert not alive(child.pid) and read_state(tmp_path) is None
    assert said == [f"stopping worker (pid {child.pid})"]
    assert down(tmp_path) == []


def test_cli_status_and_down_without_a_stack(oomrl_home: Path) -> None:
    runner = CliRunner()
    status = runner.invoke(app, ["server", "status"])
    assert status.exit_code == 1 and "nothing was started" in status.output
    assert "nothing was running" in runner.invoke(app, ["server", "down"]).output


def test_cli_status_reports_liveness(oomrl_home: Path) -> None:
    oomrl_home.mkdir(parents=True)
    (oomrl_home / "server.json").write_text(json.dumps({"pids": {"server": os.getpid()}, "ui_url": "u"}))
    result = CliRunner().invoke(app, ["server", "status"])
    assert result.exit_code == 0
    assert json.loads(result.output)["pids"]["server"] == {"pid": os.getpid(), "alive": True}


def test_webhook_serve_refuses_without_secret(monkeypatch: pytest.MonkeyPatch, oomrl_home: Path) -> None:
    monkeypatch.delenv("OOMRL_WEBHOOK_SECRET", raising=False)
    result = CliRunner().invoke(app, ["webhook", "serve", "--port", str(free_port())])
    assert result.exit_code == 1 and "OOMRL_WEBHOOK_SECRET is not set" in result.output


def test_cli_server_up_and_down_for_real(oomrl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`oomrl server up --no-deploy --no-webhook` starts a real server, pool and worker; `down` stops them."""
    import httpx

    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    runner = CliRunner()
    port = free_port()
    result = runner.invoke(app, ["server", "up", "--port", str(port), "--no-deploy", "--no-webhook"])
    try:
        assert result.exit_code == 0, result.output
        assert f"Prefect UI:  http://127.0.0.1:{port}" in result.output
        state = read_state(oomrl_home)
        assert state is not None and set(state["pids"]) == {"server", "worker"}  # type: ignore[arg-type]
        pools = httpx.post(f"http://127.0.0.1:{port}/api/work_pools/filter", json={}).json()
        assert [pool["type"] for pool in pools if pool["name"] == "oomrl-local"] == ["process"]
        assert "already running" in runner.invoke(app, ["server", "up", "--port", str(port)]).output
    finally:
        stopped = runner.invoke(app, ["server", "down"])
    assert "stopped: worker, server" in stopped.output
    assert not any(alive(int(pid)) for pid in dict(state["pids"]).values())  # type: ignore[arg-type]
