"""The local stack supervisor: configuration, secrets, process control, state file, failure
clean-up."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomrl.errors import OomrlError
from orchestration.cli import app
from orchestration.stack import (
    ProcessRecord,
    StackConfig,
    StackError,
    alive,
    down,
    free_port,
    read_state,
    record_pid,
    running,
    stack_env,
    start_process,
    starting,
    stop_process,
    up,
    webhook_secret,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _record(home: Path, **processes: subprocess.Popen[bytes]) -> None:
    """A server.json as `up` writes it, for already started children."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "server.json").write_text(
        json.dumps(
            {
                "pids": {name: p.pid for name, p in processes.items()},
                "processes": {
                    name: ProcessRecord.of(p.pid).as_json() for name, p in processes.items()
                },
            }
        )
    )


def test_config_urls_and_default_database(tmp_path: Path) -> None:
    config = StackConfig(home=tmp_path, port=4321, webhook_port=9999)
    assert (
        config.api_url == "http://127.0.0.1:4321/api" and config.ui_url == "http://127.0.0.1:4321"
    )
    assert config.webhook_url == "http://127.0.0.1:9999"
    assert config.database == f"sqlite+aiosqlite:///{tmp_path / 'prefect' / 'prefect.db'}"
    assert StackConfig(home=tmp_path, database_url="postgresql+asyncpg://u@h/db").database.endswith(
        "/db"
    )


def test_generated_secret_is_private_and_stable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OOMRL_WEBHOOK_SECRET", raising=False)
    home = tmp_path / "home"
    old = os.umask(0o022)  # a permissive umask: what oomrl creates must be private regardless
    try:
        first = webhook_secret(home)
    finally:
        os.umask(old)
    assert len(first) == 64 and webhook_secret(home) == first
    assert stat.S_IMODE((home / "webhook.secret").stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700  # OOMRL_HOME, created here
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "from-the-environment-123")
    assert webhook_secret(home) == "from-the-environment-123"


def test_stack_env_points_every_child_at_one_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    env = stack_env(StackConfig(home=tmp_path, port=4555, extra_env={"EXTRA": "1"}))
    assert env["PREFECT_API_URL"] == "http://127.0.0.1:4555/api"
    assert env["OOMRL_HOME"] == str(tmp_path) and env["PREFECT_HOME"] == str(tmp_path / "prefect")
    assert env["EXTRA"] == "1" and env["OOMRL_WEBHOOK_SECRET"] == "s" * 32


def test_the_stack_plays_the_sample_forward_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    monkeypatch.setenv("OOMRL_HOME", str(tmp_path))
    monkeypatch.delenv("OOMRL_SAMPLE_CLOCK", raising=False)
    config = StackConfig(home=tmp_path)
    # Day one: the sample's first session
    assert stack_env(config)["OOMRL_SAMPLE_CLOCK"] == "2024-07-01"
    monkeypatch.setenv("OOMRL_SAMPLE_CLOCK", "off")  # the user's word wins, `off` included
    assert stack_env(config)["OOMRL_SAMPLE_CLOCK"] == "off"
    monkeypatch.delenv("OOMRL_SAMPLE_CLOCK")
    # And so does the config file's
    (tmp_path / "config.toml").write_text('[oomrl.store]\nsample_clock = "off"\n')
    assert "OOMRL_SAMPLE_CLOCK" not in stack_env(config)


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    assert 1024 < port < 65536
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        assert sock.getsockname() == ("127.0.0.1", port)


def test_stop_process_ends_the_group(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    assert alive(child.pid)
    stop_process(child.pid, grace_s=5)
    assert not alive(child.pid)
    stop_process(child.pid)  # already gone: no error


@pytest.mark.slow
def test_stop_process_kills_what_ignores_sigterm() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', "
        "flush=True); time.sleep(60)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
    stop_process(child.pid, grace_s=0.5)
    child.stdout.close()
    assert not alive(child.pid)


@pytest.mark.slow
def test_failed_start_cleans_up_and_shows_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that dies at once (invalid Prefect setting) fails `up` with its log, no state
    left."""
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    config = StackConfig(
        home=tmp_path / "home", port=free_port(), extra_env={"PREFECT_LOGGING_LEVEL": "NOT-A-LEVEL"}
    )
    with pytest.raises(StackError, match="server"):
        up(config, say=lambda _: None)
    assert read_state(config.home) is None
    assert (config.log_dir / "server.log").exists()


REPO = Path(__file__).resolve().parents[2]
# `up` whose server is a sleeper that never answers: it prints the sleeper's pid, then waits.
TERMINATED_MID_START = (
    "import sys, time\nfrom pathlib import Path\nfrom orchestration import stack\n"
    "stack._prefect = lambda *a: [sys.executable, '-c', 'import time; time.sleep(600)']\n"
    "def held(url, pid, *rest):\n    print(pid, flush=True)\n    time.sleep(600)\n"
    "stack.wait_http = held\n"
    "stack.up(stack.StackConfig(home=Path(sys.argv[1]), deploy=False), say=lambda _: None)\n"
)


@pytest.mark.slow  # a second Python process runs `up`
def test_sigterm_during_up_stops_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service manager's SIGTERM mid-start leaves no child running and no state behind."""
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    starter = subprocess.Popen(
        [sys.executable, "-c", TERMINATED_MID_START, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert starter.stdout is not None
        server = int(starter.stdout.readline())
        assert alive(server)
        starter.send_signal(signal.SIGTERM)
        assert starter.wait(timeout=60) == 128 + signal.SIGTERM
        assert not alive(server), "the started server outlived the terminated `up`"
        assert not (tmp_path / "server.json").exists()
    finally:
        starter.kill()
        starter.wait()
        if starter.stdout:
            starter.stdout.close()


def test_up_needs_prefect_yaml_to_deploy(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="no prefect.yaml"):
        up(StackConfig(home=tmp_path / "home", project_dir=tmp_path), say=lambda _: None)
    assert not (tmp_path / "home").exists()


def test_up_refuses_when_already_running(tmp_path: Path) -> None:
    child = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        _record(tmp_path, server=child)
        with pytest.raises(StackError, match="already running"):
            up(StackConfig(home=tmp_path), say=lambda _: None)
    finally:
        child.kill()
        child.wait()


HOLD_THE_START = (
    "import sys\nfrom pathlib import Path\nfrom orchestration.stack import StackConfig, starting\n"
    "with starting(StackConfig(home=Path(sys.argv[1]))):\n"
    "    print('holding', flush=True)\n    sys.stdin.read()\n"
)


@pytest.mark.slow  # a second Python process holds the lock
def test_a_second_up_at_once_is_refused_naming_the_first(tmp_path: Path) -> None:
    """Two `up` in one home would migrate one Prefect database together: the second is refused."""
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_START, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "holding"
        with pytest.raises(
            StackError,
            match=rf"another `oomrl server up` \(pid {first.pid}, since [-0-9: ]+\) "
            rf"is starting the stack in {re.escape(str(tmp_path))}; wait for it",
        ):
            up(StackConfig(home=tmp_path, project_dir=tmp_path, deploy=False), say=lambda _: None)
        assert not (tmp_path / "server.json").exists() and not (tmp_path / "logs").exists()
        assert not (tmp_path / "prefect").exists()  # nothing of Prefect's was touched
    finally:
        first.kill()  # SIGKILL: the lock is freed by its holder's death, not by its age
        first.wait()
        if first.stdout:
            first.stdout.close()
        if first.stdin:
            first.stdin.close()
    with starting(StackConfig(home=tmp_path)):
        assert (tmp_path / "server.starting").read_text().startswith(f"pid {os.getpid()}, since ")
    assert not (tmp_path / "server.starting").exists()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OOMRL_WEBHOOK_SECRET", "short", "OOMRL_WEBHOOK_SECRET is 5 characters"),
        (
            "OOMRL_WEBHOOK_ALERTMANAGER_TOKEN",
            "tok",
            "OOMRL_WEBHOOK_ALERTMANAGER_TOKEN is 3 characters",
        ),
        ("OOMRL_WEBHOOK_DB_URL", "garbage", "OOMRL_WEBHOOK_DB_URL='garbage': not a database URL"),
    ],
)
def test_up_refuses_webhook_settings_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    # Shaped like tests/test_config.py's settings refusals, but of `up`: what it must not have
    # started.
    monkeypatch.setenv(variable, value)
    with pytest.raises(OomrlError, match=re.escape(message)):
        up(StackConfig(home=tmp_path, project_dir=tmp_path, deploy=False), say=lambda _: None)
    assert not (tmp_path / "server.json").exists() and not (tmp_path / "logs").exists()


def test_a_stale_state_file_does_not_block_up(tmp_path: Path) -> None:
    """A server.json whose pid now runs something else (here: this test) is not a running stack."""
    forged = {"pid": os.getpid(), "started": 1.0, "cmdline": ["prefect", "server", "start"]}
    (tmp_path / "server.json").write_text(
        json.dumps({"pids": {"server": os.getpid()}, "processes": {"server": forged}})
    )
    assert running(read_state(tmp_path) or {}) == {"server": False}
    with pytest.raises(StackError, match="no prefect.yaml"):  # got past the 'already running' check
        up(StackConfig(home=tmp_path, project_dir=tmp_path), say=lambda _: None)


def test_down_stops_recorded_processes(tmp_path: Path) -> None:
    child = subprocess.Popen(SLEEPER, start_new_session=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    _record(tmp_path, worker=child, server=gone)
    gone.wait()
    said: list[str] = []
    assert down(tmp_path, say=said.append) == ["worker", "server"]
    assert not alive(child.pid) and read_state(tmp_path) is None
    assert said == [f"stopping worker (pid {child.pid})"]
    assert down(tmp_path) == []


def test_down_never_signals_a_process_that_is_not_the_recorded_one(tmp_path: Path) -> None:
    """Same pid, different start time or command line: another process; `down` leaves it running."""
    stranger = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        real = ProcessRecord.of(stranger.pid)
        forged = {
            "worker": {**real.as_json(), "started": real.started - 3600},
            "webhook": {**real.as_json(), "cmdline": ["oomrl", "webhook", "serve"]},
        }
        (tmp_path / "server.json").write_text(
            json.dumps(
                {
                    "pids": {
                        "worker": stranger.pid,
                        "webhook": stranger.pid,
                        "server": stranger.pid,
                    },
                    "processes": forged,
                }
            )
        )
        said: list[str] = []
        down(tmp_path, say=said.append)
        assert stranger.poll() is None, "down killed a process it did not start"
        assert len(said) == 3 and all(line.startswith("not signalling") for line in said)
        assert "another process" in said[0] and "no start time" in said[2]
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        ("garbage", "Expecting value"),
        ("[]", 'no "pids"'),
        ("{}", 'no "pids"'),
        ('{"pids": {"server": "abc"}}', 'no "pids"'),
        ('{"pids": {"server": 0}}', 'no "pids"'),
        ("[" * 100_000, "maximum recursion depth"),
    ],
    ids=["not-json", "a-list", "no-pids", "pid-not-a-number", "pid-0", "deep-nesting"],
)
@pytest.mark.slow
def test_a_damaged_state_file_is_named_and_nothing_is_signalled(
    oomrl_home: Path, content: str, detail: str
) -> None:
    oomrl_home.mkdir(parents=True, exist_ok=True)
    path = oomrl_home / "server.json"
    for command in (["server", "status"], ["server", "down"]):
        path.write_text(content)
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert result.output.startswith(
            f"error: {path} is not a state file `oomrl server up` wrote ({detail}"
        )
        assert "no process was signalled" in result.output and "Traceback" not in result.output
        assert path.read_text() == content  # kept for the user to look at


def test_a_record_without_a_usable_identity_is_left_alone(tmp_path: Path) -> None:
    """An edited server.json (a record missing its start time): the pid is not signalled, nor said
    stopped."""
    child = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        (tmp_path / "server.json").write_text(
            json.dumps({"pids": {"worker": child.pid}, "processes": {"worker": {"pid": child.pid}}})
        )
        said: list[str] = []
        assert running(read_state(tmp_path) or {}) == {"worker": False}
        assert down(tmp_path, say=said.append) == []
        assert child.poll() is None
        assert said == [
            "not signalling worker: server.json has no start time or command line for it"
        ]
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_down_stops_the_children_of_a_leader_that_died(tmp_path: Path) -> None:
    """The recorded leader exited but left its group running (e.g. a server's subprocess)."""
    # The child outlives any run of this test, so only `down` can end it; it reports its pid through
    # a file and holds no pipe of ours, so nothing here waits for it to exit on its own.
    pid_file = tmp_path / "child.pid"
    code = (
        "import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(600)'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
        f"stderr=subprocess.DEVNULL); open({str(pid_file)!r} + '.tmp', 'w').write(str(p.pid)); "
        f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); time.sleep(600)"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() and leader.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    child_pid = int(pid_file.read_text())
    _record(tmp_path, server=leader)
    leader.kill()
    leader.wait()
    assert alive(child_pid)
    down(tmp_path, say=lambda _: None)
    deadline = time.monotonic() + 10
    while alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child_pid)


REUSE_SCRIPT = """
import json, subprocess, sys, time
from pathlib import Path
from orchestration.stack import ProcessRecord, down
home = Path(sys.argv[1]); home.mkdir(parents=True, exist_ok=True)
sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
ours = subprocess.Popen(sleeper, start_new_session=True)
pid = ours.pid
record = ProcessRecord.of(pid).as_json()
state = {"pids": {"worker": pid}, "processes": {"worker": record}}
(home / "server.json").write_text(json.dumps(state))
ours.kill(); ours.wait()
time.sleep(0.3)
# The machine goes on: the kernel hands the same pid to an unrelated process group.
Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
said = []
down(home, said.append)
time.sleep(0.5)
print(json.dumps({"reused": stranger.pid == pid, "alive": stranger.poll() is None, "said": said}))
stranger.kill()
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="needs root to set ns_last_pid in a private pid namespace",
)
@pytest.mark.slow
def test_down_spares_an_unrelated_process_group_that_reused_the_pid(tmp_path: Path) -> None:
    """A real pid reuse, made deterministic in a private pid namespace (ns_last_pid), as after a
    reboot or a long uptime: `down` must leave the new owner of the pid and its group alone."""
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            "-c",
            REUSE_SCRIPT,
            str(tmp_path / "home"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["reused"], "the kernel did not hand the pid out again"
    assert result["alive"], "down signalled the process that reused the pid"
    assert len(result["said"]) == 1 and "now belongs to another process" in result["said"][0]


def test_children_and_their_logs_are_private(tmp_path: Path) -> None:
    config = StackConfig(home=tmp_path / "home")
    code = "open('made-by-child.txt', 'w').write('x')"
    pid = start_process(
        "probe",
        [sys.executable, "-c", code],
        dict(os.environ),
        replace(config, project_dir=tmp_path),
    )
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stat.S_IMODE((tmp_path / "made-by-child.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((config.log_dir / "probe.log").stat().st_mode) == 0o600
    assert stat.S_IMODE(config.log_dir.stat().st_mode) == 0o700


def test_record_pid_adds_a_verified_process(tmp_path: Path) -> None:
    first = subprocess.Popen(SLEEPER, start_new_session=True)
    later = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        _record(tmp_path, server=first)
        record_pid(tmp_path, "worker", later.pid)
        state = read_state(tmp_path) or {}
        assert running(state) == {"server": True, "worker": True}
        assert stat.S_IMODE((tmp_path / "server.json").stat().st_mode) == 0o600
    finally:
        for child in (first, later):
            child.kill()
            child.wait()
    assert running(read_state(tmp_path) or {}) == {"server": False, "worker": False}
    with pytest.raises(StackError, match="no stack recorded"):
        record_pid(tmp_path / "elsewhere", "worker", os.getpid())


def test_cli_status_and_down_without_a_stack(oomrl_home: Path) -> None:
    runner = CliRunner()
    status = runner.invoke(app, ["server", "status"])
    assert status.exit_code == 1 and "nothing was started" in status.output
    assert "nothing was running" in runner.invoke(app, ["server", "down"]).output


def test_cli_status_reports_liveness(oomrl_home: Path) -> None:
    child = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        _record(oomrl_home, server=child)
        result = CliRunner().invoke(app, ["server", "status"])
    finally:
        child.kill()
        child.wait()
    assert result.exit_code == 0
    assert json.loads(result.output)["pids"]["server"] == {"pid": child.pid, "alive": True}
    again = CliRunner().invoke(app, ["server", "status"])
    assert json.loads(again.output)["pids"]["server"] == {"pid": child.pid, "alive": False}


def test_webhook_serve_refuses_without_secret(
    monkeypatch: pytest.MonkeyPatch, oomrl_home: Path
) -> None:
    monkeypatch.delenv("OOMRL_WEBHOOK_SECRET", raising=False)
    result = CliRunner().invoke(app, ["webhook", "serve", "--port", str(free_port())])
    assert result.exit_code == 1 and "OOMRL_WEBHOOK_SECRET is not set" in result.output


@pytest.mark.slow
def test_cli_server_up_and_down_for_real(oomrl_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`oomrl server up --no-deploy --no-webhook` starts a real server, pool and worker; `down`
    stops them."""
    import httpx

    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", "s" * 32)
    runner = CliRunner()
    port = free_port()
    result = runner.invoke(
        app, ["server", "up", "--port", str(port), "--no-deploy", "--no-webhook"]
    )
    try:
        assert result.exit_code == 0, result.output
        assert f"Prefect UI:  http://127.0.0.1:{port}" in result.output
        state = read_state(oomrl_home)
        assert state is not None and set(state["pids"]) == {"server", "worker"}  # type: ignore[arg-type]
        # Prefect's database, its folder and the logs are the user's alone.
        for path, mode in (
            (oomrl_home / "prefect" / "prefect.db", 0o600),
            (oomrl_home / "prefect", 0o700),
            (oomrl_home, 0o700),
            (oomrl_home / "logs", 0o700),
            (oomrl_home / "logs" / "server.log", 0o600),
            (oomrl_home / "server.json", 0o600),
        ):
            assert stat.S_IMODE(path.stat().st_mode) == mode, path
        pools = httpx.post(f"http://127.0.0.1:{port}/api/work_pools/filter", json={}).json()
        assert [pool["type"] for pool in pools if pool["name"] == "oomrl-local"] == ["process"]
        assert "already running" in runner.invoke(app, ["server", "up", "--port", str(port)]).output
    finally:
        stopped = runner.invoke(app, ["server", "down"])
    assert "stopped: worker, server" in stopped.output
    assert not any(alive(int(pid)) for pid in dict(state["pids"]).values())  # type: ignore[arg-type]


def test_a_child_recorded_before_it_runs_its_program_is_recorded_as_that_program(
    tmp_path: Path,
) -> None:
    import psutil

    from orchestration.stack import ProcessRecord

    # fork without exec yet: the child's command line is this process's until it runs SLEEPER
    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(go)
        os.read(ready, 1)
        os.execv(SLEEPER[0], SLEEPER)
    os.close(ready)
    try:
        assert tuple(psutil.Process(pid).cmdline()) == tuple(psutil.Process().cmdline())
        threading.Timer(0.3, os.write, (go, b"x")).start()
        record = ProcessRecord.of(pid)
        assert record.cmdline == tuple(SLEEPER) and record.identity_problem() is None
        assert ProcessRecord.of(os.getpid(), exec_wait_s=60).cmdline == tuple(
            psutil.Process().cmdline()
        )
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(go)
