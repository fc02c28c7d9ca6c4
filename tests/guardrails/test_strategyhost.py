"""Strategy host properties, each proven from inside a real host, and each shown to break when
switched off.

S (tests/guardrails/host_probe.py, planted as `strategies/probe.py` of a tmp workspace) is called
through a real host (guardrails.sandbox.strategyhost.start_host) the way every caller reaches it. A
property of the jail runs once under bwrap, where it must hold, and once under hash-only or a
deliberately weakened lock, host program or runner, where the same probe must break it: none of
these tests can pass with its property gone. Market and fingerprint tests drive the engine's host
(oomrl.portfolio.hosting.WorkspaceStrategy) and the gate's (guardrails.sandbox.runner.run_suite)
side by side.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from guardrails.sandbox import strategyhost
from guardrails.sandbox.bwrap import SANDBOX_UID, BwrapLock
from guardrails.sandbox.locks import RUN_ENV, HashOnlyLock, RoLock, make_readable
from guardrails.sandbox.runner import GateDirs, SuiteRequest, run_suite
from guardrails.sandbox.strategyhost import HostProcess, HostSpec, host_dir, relay, start_host
from strategy_host import wire
from strategy_host.client import Channel, HostError, HostGone, StrategyError
from tests.guardrails.gate_helpers import REPORT_PLUGIN, plant, servers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        BwrapLock.available() is not None, reason=f"bubblewrap unavailable: {BwrapLock.available()}"
    ),
]
REPO = Path(__file__).resolve().parents[2]
PROBE = (Path(__file__).parent / "host_probe.py").read_text(encoding="utf-8")
WORKSPACE = {
    "strategies/__init__.py": "",
    "strategies/probe.py": PROBE,
    "strategies/scan.py": "from strategies.probe import Scan\n\nSTRATEGY = Scan()\n",
    "tests/test_nothing.py": "def test_nothing():\n    assert 1\n",
    "pyproject.toml": (
        '[tool.oomrl.guard]\nsource = ["strategies"]\ntests = ["tests"]\n'
        "coverage_min = 0\nmemory_limit_mb = 3072\n"
    ),
}
MARKER = "OOMRL_PROBE_SECRET"
LOCKS = {"bwrap": BwrapLock, "hash-only": HashOnlyLock}
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="hash-only runs as this uid: needs root to differ"
)


class LeakyLock(HashOnlyLock):
    """A launch that hands the host the caller's environment (what every host must never get)."""

    def env(self, scratch: Path) -> dict[str, str]:
        return {**os.environ, **super().env(scratch)}


def call(host: HostProcess, target: str, *args: Any) -> Any:
    answer = host.request(
        {"op": "call", "target": f"strategies.probe:{target}", "args": wire.to_plain(list(args))}
    )
    return wire.from_plain(answer["value"])


@dataclass
class Planted:
    """A host over the planted workspace, with the marks its probes look for."""

    lock: RoLock
    workspace: Path
    host: HostProcess
    marks: list[Path] = field(default_factory=list)

    def inside(self, *parts: str) -> str:
        """A workspace path as the host sees it."""
        return "/".join([self.host.workspace_inside, *parts])


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    """Files of the host that S must not see: in the caller's tmp, in the repository, in /root."""
    outside = tmp_path_factory.mktemp("outside")
    placed = [outside / "parent-file", REPO / f".oomrl-probe-{secrets.token_hex(4)}"]
    if os.geteuid() == 0:
        placed.append(Path("/root") / f".oomrl-probe-{secrets.token_hex(4)}")
    for path in placed:
        path.write_text("the host's")
    os.environ[MARKER] = "leaked"
    yield placed
    os.environ.pop(MARKER, None)
    for path in placed:
        path.unlink(missing_ok=True)


@pytest.fixture(scope="module", params=sorted(LOCKS))
def planted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, marks: list[Path]
) -> Iterator[Planted]:
    lock = LOCKS[request.param]()
    workspace = plant(tmp_path_factory.mktemp("ws"), WORKSPACE)
    with start_host(lock, HostSpec(workspace)) as host:
        yield Planted(lock, workspace, host, marks)


@pytest.mark.parametrize(
    "lock", [BwrapLock(), HashOnlyLock(), LeakyLock()], ids=lambda lock: type(lock).__name__
)
def test_no_environment_variable_of_the_parent_is_visible(
    lock: RoLock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MARKER, "leaked")
    with start_host(lock, HostSpec(plant(tmp_path, WORKSPACE))) as host:
        seen = call(host, "environment")
    if isinstance(lock, LeakyLock):  # the same probe sees a leaking launch
        assert seen[MARKER] == "leaked" and seen["PATH"] == RUN_ENV["PATH"]
    else:
        assert MARKER not in seen and set(seen) - {"PWD"} <= set(RUN_ENV) | {"TMPDIR"}
        assert {k: seen[k] for k in RUN_ENV if k not in ("HOME", "TMPDIR")} == {
            k: v for k, v in RUN_ENV.items() if k != "HOME"
        }


def test_no_file_of_the_host_outside_the_workspace_copy_is_visible(planted: Planted) -> None:
    others = [str(p) for p in planted.marks] + [
        str(planted.workspace / "tests" / "test_nothing.py"),
        str(planted.workspace / "pyproject.toml"),
        planted.inside("tests"),
        planted.inside("pyproject.toml"),
        str(REPO / "pyproject.toml"),
        "/etc/passwd",
        "/home",
        "/run",
    ]
    seen = call(planted.host, "exists", [planted.inside("strategies", "probe.py"), *others])
    assert seen.pop(planted.inside("strategies", "probe.py")) is True  # S itself is there
    if planted.lock.os_level:
        assert not any(seen.values()), seen
    # without the jail, the caller's files, the repository and the workspace's tests are there
    else:
        assert all(seen[str(p)] for p in planted.marks) and seen[planted.inside("tests")], seen


def test_no_socket_of_the_host_is_reachable(planted: Planted) -> None:
    with servers() as running:
        targets = running.targets
        seen = call(planted.host, "connect", targets)
    answers = [seen[str(address)] for _, address in targets]
    if planted.lock.os_level:
        assert all(answer.startswith("error") for answer in answers), seen
    else:
        assert answers == ["host", "host", "host"]


def test_nothing_outside_tmpfs_is_writable(planted: Planted, tmp_path: Path) -> None:
    outside = tmp_path / "open"
    outside.mkdir()
    outside.chmod(0o777)
    name = f"planted-{secrets.token_hex(4)}"
    host_program = (
        f"{strategyhost.HOST_INSIDE if planted.lock.os_level else host_dir()}/strategy_host"
    )
    targets = [
        planted.inside("strategies", name),
        f"{host_program}/{name}",
        str(outside / name),
        f"/usr/lib/{name}",
    ]
    seen = call(planted.host, "write", [*targets, f"/tmp/{name}"])
    on_host = [
        planted.workspace / "strategies" / name,
        host_dir() / "strategy_host" / name,
        outside / name,
        Path("/usr/lib") / name,
    ]
    try:
        assert seen[f"/tmp/{name}"] == "written"  # its own tmpfs (the host's /tmp under hash-only)
        if planted.lock.os_level:
            # EROFS for the read-only binds and root; the caller's folder is not there at all
            assert [seen[t] for t in targets] == ["error 30", "error 30", "error 2", "error 30"]
            assert not any(path.exists() for path in on_host)
        else:
            assert all(seen[t] == "written" for t in targets) and all(p.exists() for p in on_host)
    finally:
        for path in [*on_host, Path("/tmp") / name]:
            path.unlink(missing_ok=True)


@needs_root
def test_the_host_runs_as_the_sandbox_uid_without_capabilities(planted: Planted) -> None:
    seen = call(planted.host, "identity")
    caps = {k: int(v, 16) for k, v in seen["status"].items() if k.startswith("Cap")}
    if planted.lock.os_level:
        assert seen["uid"] == seen["euid"] == seen["gid"] == SANDBOX_UID and seen["groups"] == []
        assert caps == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), 0)
        assert seen["status"]["NoNewPrivs"] == "1"
    else:
        assert seen["uid"] == 0 and caps["CapEff"] != 0


def _private(root: Path) -> Path:
    """`root` as a process with umask 077 leaves it (the server's children do): root-only."""
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o700)
        for name in files:
            os.chmod(Path(folder) / name, 0o600)
    return root


@pytest.mark.parametrize("snapshot", [True, False], ids=["snapshot", "workspace-bound-as-is"])
def test_a_workspace_written_under_a_private_umask_is_served(
    snapshot: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = _private(plant(tmp_path / "ws", WORKSPACE))
    if not snapshot:  # the host's uid cannot read a root-only folder: it cannot import S
        monkeypatch.setattr(strategyhost, "readable_snapshot", lambda root, sources: root)
    with start_host(BwrapLock(), HostSpec(workspace)) as host:
        if not snapshot:
            with pytest.raises(StrategyError, match="No module named 'strategies.probe'"):
                call(host, "exists", [])
            return
        assert call(host, "exists", ["/workspace/strategies/probe.py"]) == {
            "/workspace/strategies/probe.py": True
        }
    # The workspace itself is untouched
    assert (workspace / "strategies").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("checked", [True, False], ids=["links-left-out", "links-followed"])
def test_a_link_in_the_workspace_hands_no_file_of_the_host_over(
    checked: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "root-only.txt"
    secret.write_text("the host's")
    secret.chmod(0o600)
    workspace = plant(tmp_path / "ws", WORKSPACE)
    os.link(secret, workspace / "strategies" / "hard.txt")
    (workspace / "strategies" / "soft.txt").symlink_to(secret)
    if not checked:  # a plain copy as this (root) process reads both links and makes them readable

        def copied(root: Path, sources: tuple[str, ...]) -> Path:
            target = tmp_path / "plain-copy"
            shutil.copytree(root / "strategies", target / "strategies")
            make_readable(target)
            return target

        monkeypatch.setattr(strategyhost, "readable_snapshot", copied)
    inside = ["/workspace/strategies/hard.txt", "/workspace/strategies/soft.txt"]
    with start_host(BwrapLock(), HostSpec(workspace)) as host:
        seen = call(host, "exists", inside)
    assert seen == dict.fromkeys(inside, not checked)


def _without_fd_move(tmp_path: Path) -> Path:
    """A copy of the host program that leaves its channel on fd 1 (a weakened launch)."""
    copy = tmp_path / "host-program"
    shutil.copytree(host_dir(), copy)
    serve = copy / "strategy_host" / "serve.py"
    text = serve.read_text(encoding="utf-8")
    assert "    os.dup2(2, 1)\n" in text
    serve.write_text(text.replace("    os.dup2(2, 1)\n", ""), encoding="utf-8")
    make_readable(copy)
    return copy


@pytest.mark.parametrize("moved", [True, False], ids=["host-program", "fd-1-left-on-the-channel"])
def test_what_s_prints_cannot_corrupt_the_protocol(
    moved: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not moved:
        weakened = _without_fd_move(tmp_path)
        monkeypatch.setattr(strategyhost, "host_dir", lambda: weakened)
    with start_host(BwrapLock(), HostSpec(plant(tmp_path / "ws", WORKSPACE))) as host:
        if moved:
            assert call(host, "noisy", "true answer") == "true answer"
            assert host.request({"op": "ping"})["ok"] is True  # the channel is still in step
            assert "S says hello on stdout" in host.stderr()
        else:  # the same S writes into the channel: the caller reads garbage, never "forged"
            with pytest.raises(HostError, match="bad answer|closed its channel"):
                call(host, "noisy", "true answer")


@pytest.fixture()
def relayed(tmp_path: Path) -> Iterator[tuple[HostProcess, Channel]]:
    """A host and a test process's channel to it through the gate's relay."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE))) as host:
        pump = relay(host, ours)
        client = Channel(theirs.fileno(), theirs.fileno(), timeout_s=120)
        yield host, client
        theirs.close()
        pump.join(60)


@pytest.mark.parametrize("op", ["init", "finish"])
def test_the_relay_refuses_the_parents_ops(
    relayed: tuple[HostProcess, Channel], op: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, client = relayed
    with pytest.raises(StrategyError) as refused:
        client.request({"op": op, "paths": ["/tmp"], "preimport": ["strategies.probe"]})
    assert refused.value.kind == "request" and "not a request a test may send" in str(refused.value)
    assert client.request({"op": "ping"})["ok"] is True and host.process.poll() is None
    if op == "finish":  # with the op let through, a test process ends its host (and its coverage)
        monkeypatch.setattr(strategyhost, "RELAYED_OPS", strategyhost.RELAYED_OPS | {"finish"})
        assert client.request({"op": "finish"})["finished"] is True
        assert host.process.wait(60) == 0


@pytest.mark.parametrize("refusing", [True, False], ids=["relay", "switched-off"])
def test_a_test_process_cannot_hold_its_host_waiting_for_a_book(
    relayed: tuple[HostProcess, Channel], refusing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, client = relayed
    question = {"op": "decide", "handle": 1, "book": "next"}  # the engine's form: the book follows
    if refusing:
        with pytest.raises(StrategyError, match="carries its book"):
            client.request(question)
        assert client.request({"op": "ping"})["ok"] is True and host.process.poll() is None
        return
    monkeypatch.setattr(strategyhost, "_refusal", lambda message: "")
    host.channel.timeout_s = 3  # without the rule the host waits for a book that never comes
    opened = client.request({"op": "open", "strategy": "probe"})["handle"]
    client.send(
        {
            **question,
            "handle": opened,
            "members": None,
            "market": {"symbols": ["600000.SH"], "fields": ["close"], "capacity": 1},
            "rows": {
                "days": np.array([wire.day_ns(date(2024, 1, 2))], dtype="<i8"),
                "values": {"close": np.array([[10.0]])},
            },
        }
    )
    with pytest.raises(HostError):
        client.receive(10)
    assert host.process.poll() is not None


BLIND = (
    "from strategies.probe import Probe\n\n\nclass Blind(Probe):\n    name = 'blind'\n\n"
    "    def target_weights(self, view, holdings, params):\n        return "
    "{str(view.symbols[0]): 0.5}\n\n\n"
    "STRATEGY = Blind()\n"
)


@pytest.mark.parametrize("strategy", ["blind", "probe"])
def test_an_answer_that_never_read_its_book_comes_before_the_book(
    strategy: str, tmp_path: Path
) -> None:
    """The engine sends a decision's book after its question; a strategy that never reads the book
    (holdings or portfolio value) is answered before it arrives, one that does waits for it."""
    workspace = plant(tmp_path, {**WORKSPACE, "strategies/blind.py": BLIND})
    with start_host(BwrapLock(), HostSpec(workspace)) as host:
        handle = host.request({"op": "open", "strategy": strategy})["handle"]
        host.channel.send(
            {
                "op": "decide",
                "handle": handle,
                "book": "next",
                "members": None,
                "market": {"symbols": ["600000.SH"], "fields": ["close"], "capacity": 1},
                "rows": {
                    "days": np.array([wire.day_ns(date(2024, 1, 2))], dtype="<i8"),
                    "values": {"close": np.array([[10.0]])},
                },
            }
        )
        if strategy == "blind":  # the answer is there without the book (no book: no wait for one)
            assert host.channel.receive(10)["w"].tolist() == [0.5]
        book = {"op": "book", "handle": handle, "portfolio_value": 1.0, "holdings": {}}
        host.channel.send(book, answered=False)
        if strategy == "probe":  # it reads the portfolio value: its answer waits for the book
            assert host.channel.receive(30)["w"].tolist() == []
        # The book was read: the channel is in step
        assert host.request({"op": "ping"})["ok"] is True


def test_closing_a_host_kills_it_at_once_and_undoes_its_jail_after(tmp_path: Path) -> None:
    """`close` returns once the host is killed; its jail's set-up is undone on another thread (the
    kernel's release of a dead jail's mounts takes milliseconds), before this process ends."""
    import threading

    release, undone = threading.Event(), threading.Event()
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE))) as host:
        undo = host.prepared.cleanup

        def slow_undo() -> None:
            assert release.wait(60)
            undo()
            undone.set()

        host.prepared.cleanup = slow_undo
    # Killed; its set-up not yet undone
    assert host.process.poll() is not None and not undone.is_set()
    release.set()
    strategyhost.undone()
    assert undone.is_set()


def _undo_in_child(done: Any) -> None:
    strategyhost.undo_later(done.set)
    strategyhost.undone()


def test_a_forked_child_undoes_what_it_closes_on_its_own_thread() -> None:
    """The undoing thread is its process's: a forked child starts its own (else it would wait
    forever)."""
    import multiprocessing

    strategyhost.undo_later(lambda: None)  # the parent's thread runs
    strategyhost.undone()
    context = multiprocessing.get_context("fork")
    done = context.Event()
    child = context.Process(target=_undo_in_child, args=(done,))
    child.start()
    child.join(30)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0 and done.is_set()


@pytest.mark.parametrize(
    "sources", [("strategies",), ("strategies", "os", "posix")], ids=["S", "S-and-os"]
)
def test_calls_reach_only_public_functions_of_s(sources: tuple[str, ...], tmp_path: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE), sources)) as host:
        relay(host, ours)
        client = Channel(theirs.fileno(), theirs.fileno(), timeout_s=120)
        if sources == ("strategies",):
            for target in (
                "os:system",
                "builtins:eval",
                "strategies.probe:_origin",
                "strategies.probe",
                "strategies.probe:os.system",
                "strategy_host.serve:main",
            ):
                with pytest.raises(
                    StrategyError,
                    match="public function of strategies|not strategy code|not a function",
                ):
                    client.request({"op": "call", "target": target, "args": ["exit 3"]})
        else:  # a host that serves os as a source tree runs the same request
            assert isinstance(
                client.request({"op": "call", "target": "os:system", "args": ["exit 3"]})["value"],
                int,
            )
        theirs.close()


def test_an_answer_over_the_limit_is_refused(tmp_path: Path) -> None:
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE))) as host:
        assert call(host, "text", 5000) == "x" * 5000  # under the channel's limit
        host.channel.limit = 4096
        with pytest.raises(HostError, match="exceeds the limit of 4096"):
            call(host, "text", 5000)


def test_a_relayed_request_over_the_limit_ends_the_test_process_channel(
    relayed: tuple[HostProcess, Channel], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, client = relayed
    request = {"op": "call", "target": "strategies.probe:text", "args": [10], "pad": "y" * 5000}
    assert client.request(request)["value"] == "x" * 10
    monkeypatch.setattr(strategyhost, "RELAY_REQUEST_LIMIT", 4096)
    assert client.request({"op": "ping"})["ok"] is True
    with pytest.raises(HostError, match="closed its channel"):
        client.request(request)
    assert host.request({"op": "ping"})["ok"] is True  # the host itself serves on


def test_the_relay_drops_a_test_process_that_breaks_the_protocol(
    relayed: tuple[HostProcess, Channel],
) -> None:
    host, client = relayed
    wire.write_frame(client.write_fd, b"\x00\x00\x00\x03abc")  # a body too short for its tables
    client.pending += 1
    with pytest.raises(HostGone):
        client.receive()
    assert host.request({"op": "ping"})["ok"] is True  # its host is not disturbed


def test_a_test_process_whose_host_dies_sees_its_channel_close(
    relayed: tuple[HostProcess, Channel],
) -> None:
    host, client = relayed
    with pytest.raises(HostGone, match="closed its channel"):
        client.request({"op": "call", "target": "strategies.probe:die", "args": [7]})
    assert host.process.wait(60) == 7


def test_the_host_refuses_a_frame_over_its_limit(tmp_path: Path) -> None:
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE))) as host:
        wire.write_frame(host.channel.write_fd, (2 << 30).to_bytes(4, "big"))
        host.channel.pending += 1
        with pytest.raises(StrategyError, match="exceeds the limit"):
            host.channel.receive(60)
        assert host.process.wait(60) == 2


@pytest.mark.parametrize("watched", [True, False], ids=["watchdog", "no-watchdog"])
def test_a_hung_host_is_stopped_by_the_watchdog(watched: bool, tmp_path: Path) -> None:
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE), timeout_s=0.5)) as host:
        if watched:
            with pytest.raises(HostError, match="did not answer within 0.5 s and was stopped"):
                call(host, "sleep", 3)
            assert host.process.poll() is not None  # killed, not left running
        else:  # without its watchdog the caller waits for as long as S likes
            assert host.channel.watchdog is not None
            host.channel.watchdog.stop()
            host.channel.watchdog = None
            assert call(host, "sleep", 3) == "woke"


@pytest.mark.parametrize("code", [7, -9])
def test_a_host_that_dies_mid_request_gives_a_clear_error(code: int, tmp_path: Path) -> None:
    with start_host(BwrapLock(), HostSpec(plant(tmp_path, WORKSPACE))) as host:
        with pytest.raises(HostError) as died:
            call(host, "die", code)
        message = str(died.value)
        assert "closed its channel" in message and "S: going down" in message  # its last words
        assert (
            host.process.returncode in (code, 128 - code)
            and f"exit code {host.process.returncode}" in message
        )


def test_s_exceptions_come_back_by_builtin_type_never_as_assertions(planted: Planted) -> None:
    if not planted.lock.os_level:
        pytest.skip("a client property: once is enough")
    with pytest.raises(StrategyError) as own_assert:
        call(planted.host, "fail", "assert")
    assert (
        not isinstance(own_assert.value, AssertionError)
        and own_assert.value.type_name == "AssertionError"
    )
    with pytest.raises(ValueError, match="S's ValueError") as custom:
        call(planted.host, "fail", "custom")
    assert isinstance(custom.value, StrategyError) and custom.value.type_name == "Custom"
    assert custom.value.where == [
        "strategies/probe.py",
        PROBE.splitlines().index("def fail(kind):") + 2,
    ]
    with pytest.raises(KeyError):
        call(planted.host, "fail", "lookup")
    with pytest.raises(StrategyError) as system:  # SystemError is not mapped: a plain StrategyError
        call(planted.host, "fail", "system")
    assert type(system.value) is StrategyError and system.value.type_name == "SystemError"


# --- the market a host is given, and the engine's host beside the gate's --------------------------
SYMBOLS = [f"{600000 + i:06d}.SH" for i in range(6)]


@pytest.fixture(scope="module")
def market() -> Any:
    from oomrl.market.rules import AShareRules
    from oomrl.portfolio.market import MarketFrames
    from tests.portfolio.factories import random_panels

    return MarketFrames.build(random_panels(SYMBOLS, days=40, seed=3), AShareRules())


@dataclass
class Recorded:
    """The engine's source of a planted strategy, keeping what S recorded before its host closes.

    `ahead` writes the whole market before the first decision: what the engine must never do.
    """

    source: Any  # oomrl.portfolio.hosting.WorkspaceStrategy
    ahead: bool = False
    seen: list[Any] = field(default_factory=list)
    decisions: dict[str, dict[str, float]] = field(default_factory=dict)
    first_day: int = 0  # the first session of the engine's own copy of the shared rows, at the end

    @property
    def name(self) -> str:
        return str(self.source.name)

    def open(self, params: Mapping[str, Any] | None, market: Any) -> Any:
        runner = self.source.open(params, market, record=True)  # the runner keeps every decision
        if self.ahead:
            runner.shared.write(len(market.days))
        close = runner.close

        def closing() -> None:
            answer = runner.host.request({"op": "call", "target": "strategies.probe:seen"})
            self.seen = wire.from_plain(answer["value"])
            self.first_day = int(runner.shared.days[0])
            self.decisions = {
                str(market.days[d.t - 1]): {
                    str(market.symbols[i]): float(d.weights[i]) for i in np.flatnonzero(d.weights)
                }
                for d in runner.decisions
            }
            close()

        runner.close = closing
        return runner


def replayed(source: Recorded, market: Any) -> Recorded:
    from oomrl.market.rules import AShareRules
    from oomrl.portfolio.replay import replay

    replay(
        source,
        None,
        market,
        market.dates[5],
        market.dates[-1],
        AShareRules(),
        1e7,
        kill_threshold=1.0,
    )
    return source


def _jail(lock: RoLock) -> Any:
    return lambda unsafe=False: (lock, lock.backend)


@pytest.mark.parametrize("case", ["bwrap", "hash-only", "written-ahead"])
def test_the_shared_market_is_read_only_and_holds_no_later_row(
    case: str, tmp_path: Path, market: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.portfolio import hosting

    if case == "hash-only":
        if os.geteuid() != 0:
            pytest.skip("hash-only runs as this uid: needs root to reopen the mapping")
        monkeypatch.setattr(hosting, "jail_lock", _jail(HashOnlyLock()))
    workspace = plant(tmp_path, WORKSPACE)
    scan = replayed(
        Recorded(hosting.WorkspaceStrategy(workspace, "scan"), ahead=case == "written-ahead"),
        market,
    )
    assert len(scan.seen) >= 2  # decisions, each scanned
    for seen in scan.seen:
        latest = seen["latest"]
        if case == "written-ahead":  # the same probe finds the rows a broken engine wrote early
            assert (
                latest["mapping"]
                == latest["view"]
                == int(market.dates.values[-1].astype("<i8"))
                > seen["as_of"]
            )
            continue
        # The decision date, no later
        assert latest["mapping"] == latest["view"] == seen["as_of"], seen
        # Elsewhere in the host only the schedule question's dates (the next DUE_CHUNK sessions, no
        # market values) are later: the engine asks rebalance_due about them in one batch.
        t = int(market.dates.searchsorted(np.datetime64(seen["as_of"], "ns"))) + 1
        ahead = market.dates.values[min(t + hosting.DUE_CHUNK, len(market.days) - 1)].astype("<i8")
        assert seen["as_of"] <= latest["anywhere"] <= ahead, seen
        write = seen["write"]
        assert write["mmap"] == "refused TypeError" and write["array"] == "refused ValueError"
        assert write["mprotect"] == "error 13"  # EACCES: the descriptor it was given is read-only
        if case == "bwrap":
            assert write["map_files"].startswith("error"), write
        else:  # as root on the host, S reopens the mapping read-write
            assert write["map_files"] == "written"
    # ... and what it wrote is in the engine's own memory
    assert scan.first_day == (
        123 * wire.NS_PER_DAY if case == "hash-only" else int(market.dates.values[0].astype("<i8"))
    )


# A test of the planted workspace: it decides on the days the replay decided on, from the same
# panels, through strategy_host, and hands out its decisions and what S observed at each.
DECIDING_TEST = '''import pandas as pd

from strategy_host import call, open_strategy


def test_decides_as_the_replay_did(config, report):
    panels = {field: pd.DataFrame(p["data"], index=pd.to_datetime(p["index"]), columns=p["columns"])
              for field, p in config["panels"].items()}
    strategy = open_strategy("probe")
    decisions = {day: strategy.target_weights(panels, as_of=day) for day in config["days"]}
    seen = call("strategies.probe:seen")
    report({"decisions": decisions, "seen": seen})
    assert len(seen) == len(config["days"])
'''
# What S can observe only through names the sanitizer refuses in S (sys, os, a view array's base):
# the gate's forward run measures S's coverage in its host (a tracer, coverage's modules, its data
# file in /tmp), the engine maps the market (one more descriptor; arrays cut from a shared mapping).
REFUSED_IN_S = {"tracer", "coverage", "tmp", "fds", "view"}


def _gate_runs(workspace: Path, days: list[str], market: Any) -> dict[str, Any]:
    panels = {
        field: {
            "index": [str(d.date()) for d in frame.index],
            "columns": [str(c) for c in frame.columns],
            "data": frame.to_numpy().tolist(),
        }
        for field, frame in market.panels.items()
    }
    dirs = GateDirs.create()
    try:
        shutil.copytree(workspace, dirs.ws, ignore=shutil.ignore_patterns("__pycache__"))
        plant(dirs.ws, {"tests/test_deciding.py": DECIDING_TEST})
        runs = {}
        for tag, coverage in (("forward", ("strategies",)), ("reverse", ())):
            # The contract's limit, as the gate passes it
            suite = run_suite(
                BwrapLock(),
                dirs,
                SuiteRequest(
                    dirs.ws,
                    ("tests",),
                    tag,
                    coverage=coverage,
                    plugins=(("oomrl_report", REPORT_PLUGIN, {"panels": panels, "days": days}),),
                ),
                timeout_s=600,
                memory_mb=3072,
            )
            assert suite.problems == [] and suite.failing() == [], (suite.problems, suite.outcomes)
            runs[tag] = suite.reports["oomrl_report"]
        return runs
    finally:
        dirs.remove()


def _observed(seen: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in seen.items() if k not in REFUSED_IN_S}


@pytest.mark.parametrize("memory_mb", [None, 2048], ids=["same-jail", "other-memory-limit"])
def test_a_strategy_decides_and_observes_alike_in_the_gate_and_in_a_replay(
    memory_mb: int | None, tmp_path: Path, market: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.portfolio import hosting

    if memory_mb is not None:  # a production host started with another limit than the gate's
        monkeypatch.setattr(hosting, "_contract_of", lambda root: (("strategies",), memory_mb))
    workspace = plant(tmp_path / "ws", WORKSPACE)
    engine = replayed(Recorded(hosting.WorkspaceStrategy(workspace, "probe")), market)
    assert len(engine.decisions) >= 3 and any(engine.decisions.values())
    gate = _gate_runs(workspace, list(engine.decisions), market)
    for run in gate.values():
        decisions = {day: {k: v for k, v in w.items() if v} for day, w in run["decisions"].items()}
        assert decisions == engine.decisions  # the same decisions, to the last bit
        assert [s["as_of"] for s in run["seen"]] == [s["as_of"] for s in engine.seen]
    observed = [_observed(s) for s in engine.seen]
    if memory_mb is None:
        assert [_observed(s) for s in gate["forward"]["seen"]] == observed
        assert [_observed(s) for s in gate["reverse"]["seen"]] == observed
        assert observed[0]["cwd"] == "/workspace" and observed[0]["uid"] == SANDBOX_UID
    else:  # the probe tells the two apart by their memory limit, and by nothing else
        differing = {k for k, v in observed[0].items() if gate["reverse"]["seen"][0][k] != v}
        assert differing == {"limits"}
    # what differs lies behind names S may not use (checked by the sanitizer, below)
    assert gate["forward"]["seen"][0]["tracer"] and not gate["reverse"]["seen"][0]["tracer"]
    assert (
        not engine.seen[0]["tracer"]
        and engine.seen[0]["view"] != gate["reverse"]["seen"][0]["view"]
    )


TELLING = {
    "tracer": "import sys\nT = sys.gettrace()\n",
    "coverage": "import sys\nC = 'coverage' in sys.modules\n",
    "tmp": "import os\nF = os.listdir('/tmp')\n",
    "fds": "from pathlib import Path\nF = list(Path('/proc/self/fd').iterdir())\n",
    "view": "def f(view):\n    return view.values('close').base is None\n",
    "view-writes": "def f(view):\n    view.values('close').view().setflags(write=True)\n",
}


@pytest.mark.parametrize("observed", sorted(TELLING))
def test_what_differs_between_the_gate_and_production_is_refused_in_s(observed: str) -> None:
    from guardrails.static.capabilities import Policy
    from guardrails.static.sanitizer import scan_source

    found = scan_source(
        f"strategies/{observed}.py", TELLING[observed].encode(), None, Policy.of("source")
    )
    assert found, f"S may observe {observed} unrefused"
