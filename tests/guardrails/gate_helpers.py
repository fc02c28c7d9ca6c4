"""Shared helpers of the gate's runtime tests: toy workspaces from the corpus, diffs, tree hashes,
planted workspaces for a strategy host, host-side servers a jailed process must not reach."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from guardrails.verdict import Verdict

CORPUS = Path(__file__).resolve().parent / "corpus"
MOMENTUM = "strategies/momentum.py"
# Workspaces handed to the gate, with their digest when created (see `check_created_untouched`).
CREATED: dict[Path, str] = {}


def tree_digest(root: Path) -> str:
    """SHA-256 over every path, mode and content below `root`."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(str(path.lstat().st_mode).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@contextmanager
def unchanged(*roots: Path) -> Iterator[None]:
    """Assert that nothing below `roots` changes inside the block (the gate never writes there)."""
    before = [tree_digest(root) for root in roots]
    yield
    assert [tree_digest(root) for root in roots] == before, "the gate modified its input"


def make_workspace(
    tmp_path: Path, base: str = "honest", guard_extra: str = "", name: str = "ws"
) -> Path:
    """A writable copy of a corpus workspace with extra `[tool.oomrl.guard]` lines."""
    target = tmp_path / name
    shutil.copytree(CORPUS / "workspaces" / base, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    pyproject = target / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(
        text.replace("coverage_min = 95\n", "coverage_min = 95\n" + guard_extra, 1),
        encoding="utf-8",
    )
    CREATED[target] = tree_digest(target)
    return target


@contextmanager
def created_workspaces_untouched() -> Iterator[None]:
    """Every workspace made by `make_workspace` inside the block is unchanged at its end."""
    CREATED.clear()
    yield
    changed = [path for path, digest in CREATED.items() if tree_digest(path) != digest]
    CREATED.clear()
    assert not changed, f"the gate modified {changed}"


def diff_for(workspace: Path, changes: dict[str, str | None]) -> str:
    """A unified diff (a/ b/ prefixes) turning the workspace's files into `changes`."""
    out = []
    for rel, new in changes.items():
        path = workspace / rel
        old = path.read_text(encoding="utf-8") if path.exists() else None
        out += difflib.unified_diff(
            old.splitlines(keepends=True) if old is not None else [],
            new.splitlines(keepends=True) if new is not None else [],
            f"a/{rel}" if old is not None else "/dev/null",
            f"b/{rel}" if new is not None else "/dev/null",
        )
    return "".join(out)


def fixed_momentum() -> str:
    """The honest implementation of the toy strategy."""
    return (CORPUS / "workspaces" / "honest" / MOMENTUM).read_text(encoding="utf-8")


def shown(verdict: Verdict) -> dict[str, Any]:
    """The verdict's JSON without its wall-clock duration, which differs between any two runs
    (and grows under load): compare verdicts through this, never their `duration_s`."""
    payload = json.loads(verdict.to_json())
    assert isinstance(payload.pop("duration_s"), float)
    return payload


def plant(root: Path, files: dict[str, str]) -> Path:
    """A workspace at `root` holding `files` (relative path -> text), readable by the sandbox
    uid."""
    from guardrails.sandbox.locks import make_readable

    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    make_readable(root)
    return root


# A trusted extra plugin for `SuiteRequest.plugins`: tests read its config through the `config`
# fixture and hand a value out of the jail through `report` (the run's `reports[name]`).
REPORT_PLUGIN = '''import json
from pathlib import Path

import pytest

CONFIG = json.loads(Path(__file__).with_suffix(".json").read_text(encoding="utf-8"))


@pytest.fixture
def config():
    return CONFIG


@pytest.fixture
def report():
    def write(value):
        with open(CONFIG["report"], "w", encoding="utf-8") as handle:
            json.dump(value, handle)
    return write
'''


class Servers:
    """A TCP server on loopback, a UNIX socket in the host /tmp and an abstract UNIX socket, each
    answering `host` to whoever connects: a jailed process must reach none of them."""

    def __init__(self, folder: Path) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.path = str(folder / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.path)
        os.chmod(self.path, 0o777)
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract_name = f"\0oomrl-probe-{secrets.token_hex(4)}"
        self.abstract.bind(self.abstract_name)
        self.threads = [
            threading.Thread(target=self.serve, args=(s,), daemon=True)
            for s in (self.tcp, self.unix, self.abstract)
        ]
        for sock in (self.unix, self.abstract):
            sock.listen()
        for thread in self.threads:
            thread.start()

    @property
    def targets(self) -> list[tuple[str, Any]]:
        """(kind, address) of each server, as a probe connects to them."""
        return [
            ("tcp", ["127.0.0.1", self.tcp.getsockname()[1]]),
            ("unix", self.path),
            ("unix", self.abstract_name),
        ]

    @staticmethod
    def serve(server: socket.socket) -> None:
        try:
            while True:
                connection, _ = server.accept()
                connection.sendall(b"host")
                connection.close()
        except OSError:
            return

    def close(self) -> None:
        for sock in (self.tcp, self.unix, self.abstract):
            sock.close()


@contextmanager
def servers() -> Iterator[Servers]:
    """Servers in a fresh folder of the host's /tmp, closed and removed afterwards."""
    folder = Path("/tmp") / f"oomrl-probe-{secrets.token_hex(4)}"
    folder.mkdir()
    folder.chmod(0o777)
    running = Servers(folder)
    try:
        yield running
    finally:
        running.close()
        Path(running.path).unlink(missing_ok=True)
        folder.rmdir()


@contextmanager
def own_host_state() -> Iterator[None]:
    """This session's strategy_host channel and hostplugin hosts set aside while code under test
    (a child launcher, an inner pytest session) connects strategy_host in this process."""
    import strategy_host
    from guardrails.sandbox import hostplugin

    state, hosts = dict(strategy_host._STATE), list(hostplugin._HOSTS)
    hostplugin._HOSTS.clear()
    try:
        yield
    finally:
        strategy_host._STATE.update(state)
        hostplugin._HOSTS[:] = hosts
