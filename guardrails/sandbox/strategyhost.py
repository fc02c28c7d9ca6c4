"""Strategy hosts: start the jailed process where S runs, talk to it, relay a test process to it.

Every call into a workspace's code goes to a host started here. It runs in the same jail as the
gate's test runs. That is bubblewrap: unprivileged uid, no network, fresh tmpfs, read-only binds,
memory limit. The environment is the same (`RUN_ENV`) whoever starts it. So nothing S can observe
tells the gate from production.

The jail holds the interpreter and installed packages. It holds `/host`: the host program and the
strategy API, copied from this installation. It holds the workspace's source trees read-only under
`/workspace`. It never holds its tests, the caller's files, environment or sockets. The host speaks
on one UNIX socket (its stdin and stdout). The parent decodes every answer itself.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import importlib.util
import os
import queue
import shutil
import socket
import stat
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from guardrails.errors import GateSetupError
from guardrails.sandbox.locks import Bind, Prepared, RoLock, make_readable
from guardrails.sandbox.tempdirs import owned_temp_dir
from strategy_host import wire
from strategy_host.client import Channel, HostError, HostGone

HOST_INSIDE, WORKSPACE_INSIDE = "/host", "/workspace"
# The packages copied into /host: the host program (with its wire format) and the strategy API.
HOST_PACKAGES = ("strategy_host", "strategy_api")
START_TIMEOUT_S = 120.0
STDERR_KEPT = 16_384
# A decision takes the host a few hundred microseconds. The engine polls for its answer that long
# before it sleeps in a read. So the scheduler need not wake it on every decision.
ANSWER_POLL_S = 0.002
# How long an engine's host polls for its next request before it sleeps in a read.
# A replay's next request comes within a rebalance's work.
# A test's host (HostSpec's default) sleeps at once.
HOST_POLL_S = 0.002
EXIT_WAIT_S = 10.0  # for a closed host to exit, so its error names the exit code.
# What a test process may ask of its host through the relay (never `init` or `finish`).
RELAYED_OPS = frozenset({"open", "market", "append", "decide", "due", "call", "ping"})
RELAY_REQUEST_LIMIT = 256 << 20
SNAPSHOT_LIMIT_BYTES = 64 << 20  # a workspace's source trees are code: far less than this

_T = TypeVar("_T")  # what an exchange with the host returns


@functools.cache
def host_dir() -> Path:
    """A private copy of the host program and the strategy API (0755/0644).

    It is made once per process.
    """
    root = owned_temp_dir("oomrl-host-")  # its packages are bound into jails, its owner note is not
    atexit.register(shutil.rmtree, root, True)
    for package in HOST_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise GateSetupError(
                f"the {package} package is not installed: no strategy host can start"
            )
        source = Path(next(iter(spec.submodule_search_locations)))
        shutil.copytree(
            source, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    make_readable(root)
    return root


def readable_snapshot(workspace: Path, sources: tuple[str, ...]) -> Path:
    """A private copy of the workspace's source trees that the jail's uid can read (0755/0644).

    The jail's uid reads only what is world-readable. A workspace folder written under a private
    umask is not (the server's children use 077). The host sees a copy made now for its whole
    life. Whatever happens to the workspace meanwhile does not reach it. Only folders and regular
    files with one link are copied. A symlink or a hard link could name a file the jail may not
    read. This process may read it, so copying it would hand its content over.
    """
    root = owned_temp_dir("oomrl-hostws-")  # its trees are bound into a jail, its owner note is not
    try:
        total = 0
        for tree in sources:
            source = workspace / tree
            if not source.is_dir() or source.is_symlink():
                continue
            for folder, dirs, files in os.walk(source):
                relative = Path(folder).relative_to(workspace)
                (root / relative).mkdir(parents=True, exist_ok=True)
                dirs[:] = [
                    d for d in dirs if d != "__pycache__" and not (Path(folder) / d).is_symlink()
                ]
                for name in files:
                    path = Path(folder) / name
                    info = path.lstat()
                    if (
                        name.endswith(".pyc")
                        or not stat.S_ISREG(info.st_mode)
                        or info.st_nlink != 1
                    ):
                        continue
                    total += info.st_size
                    if total > SNAPSHOT_LIMIT_BYTES:
                        raise GateSetupError(
                            f"the workspace's {', '.join(sources)} hold more than "
                            f"{SNAPSHOT_LIMIT_BYTES >> 20} MiB: no strategy host serves them"
                        )
                    shutil.copyfile(path, root / relative / name, follow_symlinks=False)
        make_readable(root)
    except BaseException:
        shutil.rmtree(root, True)
        raise
    return root


@dataclass(frozen=True)
class HostSpec:
    """What a host serves: a workspace's source trees, and whether to measure their coverage."""

    workspace: Path
    sources: tuple[str, ...] = ("strategies",)
    coverage: bool = False
    memory_mb: int = 4096
    timeout_s: float = 300.0  # per request
    # How long the host polls for its next request before it sleeps (HOST_POLL_S).
    poll_s: float = 0.0

    def modules(self) -> list[str]:
        """Importable names of every source module (imported first, in the import context)."""
        names = []
        for tree in self.sources:
            for path in sorted((self.workspace / tree).rglob("*.py")):
                parts = path.relative_to(self.workspace).with_suffix("").parts
                parts = parts[:-1] if parts[-1] == "__init__" else parts
                if parts and all(part.isidentifier() for part in parts):
                    names.append(".".join(parts))
        return names


@dataclass
class HostProcess:
    """A running strategy host: its channel, the tail of its stderr, and how to end it."""

    process: subprocess.Popen[bytes]
    channel: Channel
    prepared: Prepared
    lock: RoLock
    workspace_inside: str
    stderr_tail: collections.deque[bytes] = field(
        default_factory=lambda: collections.deque(maxlen=64)
    )
    closed: bool = False
    drain: threading.Thread | None = None

    def stderr(self) -> str:
        """What the host (or S in it) last wrote to stderr, at most STDERR_KEPT bytes."""
        return b"".join(self.stderr_tail).decode("utf-8", "replace")[-STDERR_KEPT:]

    def request(self, message: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """One request and its answer; HostError names the host's last words when it failed."""
        return self._named(lambda: self.channel.request(message, timeout_s))

    def send(self, message: dict[str, Any], answered: bool = True) -> None:
        """A request whose answer `receive` takes later; the caller works meanwhile.

        With `answered` False it is the book of the decision asked just before. That has no answer
        of its own.
        """
        self._named(lambda: self.channel.send(message, answered=answered))

    def receive(self) -> dict[str, Any]:
        """The answer to the oldest request sent and not yet answered."""
        return self._named(self.channel.receive)

    def _named(self, exchange: Callable[[], _T]) -> _T:
        try:
            return exchange()
        except HostGone as exc:
            raise HostGone(f"{exc}{self._last_words(True)}") from None
        except HostError as exc:
            raise HostError(f"{exc}{self._last_words()}") from None

    def _last_words(self, gone: bool = False) -> str:
        """Its exit code and the last lines of its stderr, once it has exited.

        With `gone`, wait for it to exit first.
        """
        if gone:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(EXIT_WAIT_S)
        if self.process.poll() is None:
            return ""
        if self.drain is not None:
            # The rest of what it wrote (unless a child of S still holds stderr)
            self.drain.join(2.0)
        tail = self.stderr().strip().splitlines()[-3:]
        return f" (exit code {self.process.returncode}; {' / '.join(tail) or 'no output'})"

    def finish(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Ask the host to end (it saves its coverage first); its last answer."""
        try:
            return self.request({"op": "finish"}, timeout_s)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the host (its whole session) and undo its jail's set-up."""
        if self.closed:
            return
        self.closed = True
        if self.channel.watchdog is not None:
            self.channel.watchdog.stop()
        self.channel.reader.close()
        for fd in {self.channel.write_fd, self.channel.read_fd}:
            with contextlib.suppress(OSError):
                os.close(fd)
        _kill_session(self.process)  # its answers are in: nothing of it is worth waiting for
        undo_later(self.prepared.done)

    def __enter__(self) -> HostProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Closed hosts' jail set-ups still to undo: their stage's mount points, their workspace copy.
# They are undone on a thread of their own. A jail's processes are killed first. Then the kernel
# needs milliseconds to release its mounts (tens on a busy machine). Only then can folders go.
# That is a tenth of a W1 replay, and its caller need not wait for it.
# What is queued at exit is undone before the interpreter ends.
_UNDO: queue.Queue[Callable[[], None]] = queue.Queue()
_UNDO_STARTED = threading.Event()
_UNDO_LOCK = threading.Lock()


def undo_later(cleanup: Callable[[], None]) -> None:
    """Run `cleanup` (a closed host's jail set-up undone) on the undoing thread.

    The thread starts on first use.
    """
    with _UNDO_LOCK:
        if not _UNDO_STARTED.is_set():
            threading.Thread(target=_undo_queued, name="oomrl-host-undo", daemon=True).start()
            atexit.register(undone)
            _UNDO_STARTED.set()
    _UNDO.put(cleanup)


def undone() -> None:
    """Wait until every closed host's jail set-up is undone."""
    _UNDO.join()


def _forked() -> None:
    """A forked child has no undoing thread, and its parent's queue is not its own: start afresh."""
    global _UNDO, _UNDO_LOCK
    _UNDO, _UNDO_LOCK = queue.Queue(), threading.Lock()
    _UNDO_STARTED.clear()


os.register_at_fork(after_in_child=_forked)


def _undo_queued() -> None:
    while True:
        cleanup = _UNDO.get()
        try:
            cleanup()
        except Exception:  # noqa: BLE001, S110 - a folder left behind is cleared once this process ends (oomrl.scratch)
            pass
        finally:
            _UNDO.task_done()


def _kill_session(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, 9)
    process.wait()


def _drain(stream: Any, tail: collections.deque[bytes]) -> None:
    for chunk in iter(lambda: stream.read1(4096), b""):
        tail.append(chunk)
    stream.close()


def start_host(lock: RoLock, spec: HostSpec) -> HostProcess:
    """Start a host for `spec` under `lock` and wait until it is ready (imports done)."""
    package = host_dir()
    if lock.os_level:
        private = readable_snapshot(spec.workspace, spec.sources)
        binds = [Bind(package / name, f"{HOST_INSIDE}/{name}") for name in HOST_PACKAGES] + [
            Bind(private / tree, f"{WORKSPACE_INSIDE}/{tree}")
            for tree in spec.sources
            if (private / tree).exists()
        ]
        inside_host, inside_ws = HOST_INSIDE, WORKSPACE_INSIDE
        env = lock.env(Path("/tmp"))
    else:  # hash-only: a plain process on the host with the same environment, nothing hidden
        binds = []
        inside_host, inside_ws = str(package), str(spec.workspace)
        private = owned_temp_dir("oomrl-hosthome-")
        env = lock.env(private)
    argv = [lock.python(), "-I", "-S", "-B", f"{inside_host}/strategy_host/serve.py"]
    try:
        prepared = lock.prepare(argv, binds=binds, cwd=inside_ws, env=env, memory_mb=spec.memory_mb)
    except BaseException:
        shutil.rmtree(private, True)
        raise
    prepared.cleanup = _chain(prepared.cleanup, lambda: shutil.rmtree(private, True))
    parent_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        process = subprocess.Popen(
            prepared.argv,
            env=prepared.env,
            cwd=prepared.cwd,
            stdin=host_end.fileno(),
            stdout=host_end.fileno(),
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        parent_end.close()
        prepared.done()
        raise GateSetupError(f"could not start a strategy host: {exc}") from None
    finally:
        host_end.close()
    assert process.stderr is not None
    fd = parent_end.detach()
    channel = Channel(
        fd, fd, spec.timeout_s, on_timeout=lambda: _kill_session(process), poll_s=ANSWER_POLL_S
    )
    host = HostProcess(process, channel, prepared, lock, inside_ws)
    host.drain = threading.Thread(
        target=_drain, args=(process.stderr, host.stderr_tail), daemon=True
    )
    host.drain.start()
    coverage = (
        {
            "source": [f"{inside_ws}/{tree}" for tree in spec.sources],
            "data_file": "/tmp/oomrl-host-coverage"
            if lock.os_level
            else str(Path(env["TMPDIR"]) / "coverage"),
        }
        if spec.coverage
        else None
    )
    init = {
        "op": "init",
        "paths": [inside_host, inside_ws],
        "site": lock.site_paths(),
        "packages": [tree.replace("/", ".") for tree in spec.sources],
        "preimport": (replace(spec, workspace=private) if lock.os_level else spec).modules(),
        "coverage": coverage,
        "poll_s": spec.poll_s,
    }
    try:
        channel.send(init, START_TIMEOUT_S)
        channel.receive(START_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure to start is said, with the host's last words
        words = host._last_words(isinstance(exc, HostGone))  # before close() kills what is left
        host.close()
        raise HostError(f"the strategy host did not start: {exc}{words}") from None
    return host


def _chain(first: Any, second: Any) -> Any:
    def both() -> None:
        if first is not None:
            first()
        second()

    return both


def _refusal(message: dict[str, Any]) -> str:
    """Why the relay refuses a test process's request ('' when it passes).

    Only the ops a caller may use pass. A decision must carry its own book. A book that follows in
    another frame is the engine's.
    """
    if message.get("op") not in RELAYED_OPS:
        return f"{message.get('op')!r} is not a request a test may send"
    if "book" in message:
        return "a test's decision carries its book (holdings, portfolio_value) in the request"
    return ""


def relay(host: HostProcess, peer: socket.socket) -> threading.Thread:
    """Forward a test process's requests (on `peer`) to `host` until the test process ends.

    Only the ops a caller may use pass. The answers go back as they came. When the peer closes,
    whoever joins the returned thread finishes the host, which saves its coverage.
    """

    def pump() -> None:
        fd = peer.fileno()
        reader = wire.FrameReader(fd)
        try:
            while True:
                try:
                    message = reader.read(RELAY_REQUEST_LIMIT)
                except (EOFError, wire.WireError, OSError):
                    return
                refused = _refusal(message)
                if refused:
                    answer = wire.encode(
                        {
                            "error": {
                                "kind": "request",
                                "type": "Refused",
                                "builtin": "ValueError",
                                "message": refused,
                            }
                        }
                    )
                else:
                    try:
                        answer = wire.encode(host.channel.request_raw(message))
                    except HostError:
                        return
                try:
                    wire.write_frame(fd, answer)
                except (wire.WireError, OSError):
                    return
        finally:
            peer.close()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread
