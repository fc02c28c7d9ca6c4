"""A local oomrl stack: Prefect server, the `oomrl-local` pool and worker, deployments, webhook.

Everything runs as child processes recorded in OOMRL_HOME/server.json. Each record holds the pid,
start time and command line. So `oomrl server down` stops exactly what `up` started. It never stops
a process that later reused a pid. Children run with umask 077. So the Prefect database, logs and
run folders they write under OOMRL_HOME are private to the user. Prefect's processes are started
through its CLI (each must outlive this one) and waited for over HTTP.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import psutil

from oomrl.errors import OomrlError
from oomrl.files import atomic_write, private_dir, private_file
from oomrl.owners import START_TOLERANCE_S
from oomrl.settings import configured, environment, get_settings

PROJECT_DIR = Path(__file__).resolve().parent.parent
POOL = "oomrl-local"
EXITED = "it has exited"
PRIVATE_UMASK = 0o077  # files 0600, folders 0700 for everything the stack's children create
STARTING_LOCK = "server.lock"
STARTING_NOTE = "server.starting"  # who holds the lock, for the message of a second `up`
Say = Callable[[str], None]


class StackError(OomrlError):
    """The local stack could not be started or stopped."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class StackConfig:
    """Where and how the stack runs."""

    home: Path
    host: str = "127.0.0.1"
    port: int = 4200
    webhook_port: int = 8765
    # PREFECT_API_DATABASE_CONNECTION_URL; SQLite under home when None
    database_url: str | None = None
    project_dir: Path = PROJECT_DIR
    deploy: bool = True
    worker: bool = True
    webhook: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}/api"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def webhook_url(self) -> str:
        return f"http://{self.host}:{self.webhook_port}"

    @property
    def state_file(self) -> Path:
        return self.home / "server.json"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.home / 'prefect' / 'prefect.db'}"


def webhook_secret(home: Path) -> str:
    """OOMRL_WEBHOOK_SECRET, else a random one kept (mode 0600) in OOMRL_HOME, never in the repo."""
    configured_secret = get_settings().webhook.secret
    if configured_secret:
        return configured_secret
    path = home / "webhook.secret"
    if not path.exists():
        private_file(path)  # 0600 before the secret is in it (OOMRL_HOME 0700 when created here)
        path.write_text(secrets.token_hex(32))
    return path.read_text().strip()


def check_webhook(config: StackConfig) -> None:
    """The webhook child's settings as it will read them.

    A named error when it would refuse to start.
    """
    from oomrl.settings import webhook_settings

    webhook = webhook_settings()
    webhook.secret = webhook_secret(config.home)
    webhook.required_secret()
    webhook.required_token()


def stack_env(config: StackConfig) -> dict[str, str]:
    """The environment every child process shares: one Prefect API, one OOMRL_HOME.

    The sample clock is at DAY_ONE unless OOMRL_SAMPLE_CLOCK (or the config file) says otherwise,
    `off` included. So a fresh stack's deployments tell the loop's story on their defaults
    (oomrl/data/sample_clock.py).
    """
    env = environment()
    env.update(
        {
            "OOMRL_HOME": str(config.home),
            "PREFECT_HOME": str(config.home / "prefect"),
            "PREFECT_API_URL": config.api_url,
            "PREFECT_API_DATABASE_CONNECTION_URL": config.database,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
            "OOMRL_WEBHOOK_SECRET": webhook_secret(config.home),
            # Where browsers fetch report charts and tearsheets that artifacts link.
            # A proxy may set its own.
            "OOMRL_REPORTS_URL": get_settings().runtime.reports_url or config.webhook_url,
            "PYTHONUNBUFFERED": "1",
        }
    )
    # Day one: the sample played forward from its first session on
    if not configured("store.sample_clock"):
        from oomrl.data.sample_clock import DAY_ONE

        env["OOMRL_SAMPLE_CLOCK"] = DAY_ONE.isoformat()
    env.update(config.extra_env)
    return env


def _prefect(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefect", *args]


def start_process(name: str, argv: list[str], env: dict[str, str], config: StackConfig) -> int:
    """Start a child in its own session, so `down` can stop its whole group.

    It logs to logs/<name>.log (0600).
    """
    private_dir(config.log_dir, tighten=True)
    log = os.fdopen(
        os.open(config.log_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab"
    )
    process = subprocess.Popen(
        argv,
        env=env,
        cwd=config.project_dir,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        umask=PRIVATE_UMASK,
    )
    log.close()
    return process.pid


# How long a just-forked child may take to start its program before it is recorded
EXEC_WAIT_S = 5.0


@dataclass(frozen=True)
class ProcessRecord:
    """Who a recorded pid was when it was started.

    That is enough to tell it from a process that reused the pid.
    """

    pid: int
    started: float  # psutil create_time(), seconds since the epoch
    cmdline: tuple[str, ...]

    @classmethod
    def of(cls, pid: int, exec_wait_s: float = EXEC_WAIT_S) -> ProcessRecord:
        """The record of `pid`.

        A child this process has just forked may not have run its program yet. Its command line is
        still this process's, or empty while it execs. So it is waited for up to `exec_wait_s`.
        Else the record would name a program the pid soon stops being. It would read as another
        process.
        """
        process = psutil.Process(pid)
        cmdline = tuple(process.cmdline())
        if pid != os.getpid():
            own, deadline = tuple(psutil.Process().cmdline()), time.monotonic() + exec_wait_s
            # () while it execs
            while (cmdline == own or not cmdline) and time.monotonic() < deadline:
                time.sleep(0.005)
                cmdline = tuple(process.cmdline())
        return cls(pid, process.create_time(), cmdline)

    def as_json(self) -> dict[str, object]:
        return {"pid": self.pid, "started": self.started, "cmdline": list(self.cmdline)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(int(data["pid"]), float(data["started"]), tuple(data["cmdline"]))

    def identity_problem(self) -> str | None:
        """None when the pid still runs the recorded process.

        Else why it is not ours (gone or reused).
        """
        try:
            process = psutil.Process(self.pid)
            started, cmdline = process.create_time(), tuple(process.cmdline())
        except psutil.NoSuchProcess:
            return EXITED
        except psutil.AccessDenied:
            return f"pid {self.pid} now belongs to a process of another user"
        if process.status() == psutil.STATUS_ZOMBIE:
            return EXITED
        if abs(started - self.started) > START_TOLERANCE_S or cmdline != self.cmdline:
            return (
                f"pid {self.pid} now belongs to another process ({' '.join(cmdline)[:80] or '?'}, "
                f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))})"
            )
        return None


def alive(pid: int) -> bool:
    """Whether a process with this id exists (and is not a zombie we own)."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process(pid: int, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Signal the process group led by `pid`, then kill it if it is still there after `grace_s`."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while alive(pid) and time.monotonic() < deadline + 5:
        time.sleep(0.1)


def group_members(record: ProcessRecord) -> list[psutil.Process]:
    """Processes still in the recorded leader's group and started after it: its own children."""
    members = []
    for process in psutil.process_iter(["pid", "create_time"]):
        try:
            if (
                os.getpgid(process.pid) == record.pid
                and process.info["create_time"] >= record.started - 0.05
            ):
                members.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def stop_recorded(record: ProcessRecord, grace_s: float = 10.0) -> str | None:
    """Stop a process `up` started, with its group.

    None when stopped, else why it was left alone.
    """
    problem = record.identity_problem()
    if problem is None:
        stop_process(record.pid, grace_s)
        return None
    # The leader died; its children may still hold ports or files. Only when the pid is free.
    # A live process on that pid (a reuse) owns any group of that number. It is none of ours.
    orphans = group_members(record) if problem == EXITED else []
    if orphans:
        for process in orphans:
            with suppress(psutil.NoSuchProcess):
                process.terminate()
        _, alive_after = psutil.wait_procs(orphans, timeout=grace_s)
        for process in alive_after:
            with suppress(psutil.NoSuchProcess):
                process.kill()
        return None
    return problem


def wait_http(url: str, pid: int, name: str, timeout_s: float, config: StackConfig) -> None:
    """Wait until `url` answers 200, failing early (with the log's tail) if the process died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            raise StackError(f"{name} exited during start-up:\n{log_tail(config, name)}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise StackError(
        f"{name} did not answer {url} within {timeout_s:.0f} s:\n{log_tail(config, name)}"
    )


def log_tail(config: StackConfig, name: str, lines: int = 25) -> str:
    """The last lines of a child's log."""
    path = config.log_dir / f"{name}.log"
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def read_state(home: Path) -> dict[str, object] | None:
    """What `up` recorded, or None.

    StackError when the file is not what `up` writes; nothing is signalled then.
    """
    path = home / "server.json"
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    # RecursionError: nesting too deep for json
    except (OSError, ValueError, RecursionError) as exc:
        raise StackError(_unusable(path, str(exc))) from None
    pids = state.get("pids") if isinstance(state, dict) else None
    # pid 0 or 1 would make killpg signal our own group or init's.
    # No pid `up` records is either.
    if not isinstance(pids, dict) or not all(type(pid) is int and pid > 1 for pid in pids.values()):
        raise StackError(_unusable(path, 'no "pids" of processes'))
    return cast(dict[str, object], state)


def _unusable(path: Path, detail: str) -> str:
    return (
        f"{path} is not a state file `oomrl server up` wrote ({detail}); no process was signalled: "
        "stop what still runs by hand, then delete the file"
    )


def recorded_processes(state: dict[str, object]) -> dict[str, ProcessRecord]:
    """The processes of a state file.

    A pid recorded without a usable identity (older or edited files) has none. It is never
    signalled.
    """
    processes = state.get("processes")
    records = {}
    for name, data in processes.items() if isinstance(processes, dict) else ():
        try:
            records[name] = ProcessRecord.from_json(data)
        except (KeyError, TypeError, ValueError):
            continue
    return records


def running(state: dict[str, object]) -> dict[str, bool]:
    """For each recorded name: does its pid still run the process `up` started?"""
    records = recorded_processes(state)
    return {
        name: name in records and records[name].identity_problem() is None
        for name in dict(state["pids"])  # type: ignore[call-overload]
    }


def _save_state(home: Path, state: dict[str, object]) -> None:
    payload = json.dumps(state, indent=2)
    # 0600 from the start
    atomic_write(home / "server.json", lambda temp: Path(temp).write_text(payload))


def record_pid(home: Path, name: str, pid: int) -> None:
    """Record a process started after `up` (e.g. a restarted worker) so `down` stops it too."""
    state = read_state(home)
    if state is None:
        raise StackError(f"no stack recorded in {home / 'server.json'}")
    state["pids"] = {**dict(state["pids"]), name: pid}  # type: ignore[call-overload]
    state["processes"] = {
        **dict(state.get("processes") or {}),  # type: ignore[call-overload]
        name: ProcessRecord.of(pid).as_json(),
    }
    _save_state(home, state)


def _write_state(config: StackConfig, pids: dict[str, int]) -> dict[str, object]:
    state: dict[str, object] = {
        "pids": pids,
        "processes": {name: ProcessRecord.of(pid).as_json() for name, pid in pids.items()},
        "api_url": config.api_url,
        "ui_url": config.ui_url,
        "webhook_url": config.webhook_url if "webhook" in pids else None,
        "database": config.database.split("@")[-1],
        "started_at": time.time(),
    }
    _save_state(config.home, state)
    return state


def _run(argv: list[str], env: dict[str, str], config: StackConfig, what: str) -> str:
    done = subprocess.run(
        argv,
        env=env,
        cwd=config.project_dir,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise StackError(
            f"{what} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return done.stdout


def start_worker(config: StackConfig, env: dict[str, str]) -> int:
    """A process worker on the `oomrl-local` pool."""
    return start_process(
        "worker",
        _prefect(
            "worker",
            "start",
            "--pool",
            POOL,
            "--type",
            "process",
            "--name",
            f"oomrl-worker-{os.getpid()}",
        ),
        env,
        config,
    )


def webhook_argv(config: StackConfig) -> list[str]:
    """`oomrl webhook serve` on the configured host and port."""
    return [
        sys.executable,
        "-m",
        "orchestration",
        "webhook",
        "serve",
        "--host",
        config.host,
        "--port",
        str(config.webhook_port),
    ]


def start_webhook(config: StackConfig, env: dict[str, str]) -> int:
    """`oomrl webhook serve` on the configured port; returns once it answers /healthz."""
    pid = start_process("webhook", webhook_argv(config), env, config)
    wait_http(f"{config.webhook_url}/healthz", pid, "webhook", 60, config)
    return pid


@contextmanager
def starting(config: StackConfig) -> Iterator[None]:
    """One `up` at a time in a home.

    Two at once would migrate one Prefect database together. The guard is an OS file lock. It is
    free again when its holder exits, however it exits. A second `up` is refused at once, naming
    the first.
    """
    from filelock import FileLock, Timeout

    private_dir(config.home)
    note = config.home / STARTING_NOTE
    lock = FileLock(
        config.home / STARTING_LOCK, mode=0o600, thread_local=False, fallback_to_soft=False
    )
    try:
        lock.acquire(timeout=0)
    except Timeout:
        try:
            holder = note.read_text().strip()
        except OSError:
            holder = "another process"
        raise StackError(
            f"another `oomrl server up` ({holder}) is starting the stack in {config.home}; wait "
            "for it, then `oomrl server status`"
        ) from None
    try:
        atomic_write(
            note,
            lambda temp: Path(temp).write_text(
                f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}"
            ),
        )
        yield
    finally:
        note.unlink(missing_ok=True)
        lock.release()


def up(config: StackConfig, say: Say = print) -> dict[str, object]:
    """Start the stack; on any failure, stop what was started and raise StackError."""
    if config.deploy and not (config.project_dir / "prefect.yaml").exists():
        raise StackError(
            f"no prefect.yaml in {config.project_dir}: run from a checkout "
            "(pip install -e .) or pass --no-deploy"
        )
    with starting(config):
        previous = read_state(config.home)
        if previous and any(running(previous).values()):
            raise StackError(
                f"a stack is already running ({config.state_file}); run `oomrl server down` first"
            )
        with _terminated_as_interrupt():
            return _start(config, say)


@contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP during a start raise SystemExit, so the children already started are
    stopped as on Ctrl-C. By default they would end this process at once, leaving the children
    (each in its own session) running and unrecorded. Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, _exit) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start(config: StackConfig, say: Say) -> dict[str, object]:
    """Start the children in order, each waited for.

    On a failure the ones started are stopped.
    """
    # Its settings (the secret's length, the token, the database URL) fail now, not
    if config.webhook:
        check_webhook(config)  # after the server and the worker have started
    # The SQLite database and Prefect's own files
    private_dir(config.home / "prefect", tighten=True)
    sqlite_file = (
        config.database.split(":///", 1)[-1] if config.database.startswith("sqlite") else None
    )
    if sqlite_file and Path(sqlite_file).exists():
        Path(sqlite_file).chmod(0o600)  # created by an older version with the default umask
    env = stack_env(config)
    pids: dict[str, int] = {}
    try:
        say(
            f"starting Prefect server on {config.ui_url} (database "
            f"{config.database.split('@')[-1]})"
        )
        pids["server"] = start_process(
            "server",
            _prefect("server", "start", "--host", config.host, "--port", str(config.port)),
            env,
            config,
        )
        wait_http(f"{config.api_url}/health", pids["server"], "server", 180, config)
        _write_state(config, pids)
        say(f"creating process work pool {POOL}")
        _run(
            _prefect("work-pool", "create", POOL, "--type", "process", "--overwrite"),
            env,
            config,
            "creating the work pool",
        )
        if config.deploy:
            say("deploying prefect.yaml")
            _run(_prefect("--no-prompt", "deploy", "--all"), env, config, "prefect deploy --all")
        if config.worker:
            say("starting a worker")
            pids["worker"] = start_worker(config, env)
        if config.webhook:
            say(f"starting the webhook on {config.webhook_url}")
            pids["webhook"] = start_webhook(config, env)
    except BaseException:
        for pid in reversed(list(pids.values())):
            stop_process(pid)
        config.state_file.unlink(missing_ok=True)
        raise
    return _write_state(config, pids)


def down(home: Path, say: Say = print) -> list[str]:
    """Stop what `up` started (newest first), never a process that reused a recorded pid.

    Returns the names stopped (or found exited), not those left alone.
    """
    state = read_state(home)
    if state is None:
        return []
    records = recorded_processes(state)
    stopped = []
    for name in ("webhook", "worker", "server"):
        if name not in dict(state["pids"]):  # type: ignore[call-overload]
            continue
        record = records.get(name)
        problem = (
            record.identity_problem()
            if record
            else "server.json has no start time or command line for it"
        )
        if problem is None:
            say(f"stopping {name} (pid {record.pid})")  # type: ignore[union-attr]
        left_alone = stop_recorded(record) if record else problem
        if left_alone and left_alone != EXITED:
            say(f"not signalling {name}: {left_alone}")
        else:
            stopped.append(name)
    (home / "server.json").unlink(missing_ok=True)
    return stopped
