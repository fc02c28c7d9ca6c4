"""RO-Lock: scratch copies, SHA-256 manifests of locked trees, and the OS-level lock backends."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardrails.verdict import Violation
from guardrails.workspace import GateSetupError

NSEXEC = Path(__file__).with_name("nsexec.py")
# Files that configure Python start-up, pytest or coverage: anchored wherever they are.
CONFIG_FILE_NAMES = frozenset({
    "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
    "setup.cfg", "setup.py", "pyproject.toml", ".coveragerc", "sitecustomize.py",
    "usercustomize.py", "noxfile.py", "pyvenv.cfg",
})
CONFIG_SUFFIXES = (".pth",)
# Never copied into the scratch area: VCS data, caches, byte code, virtual environments.
SKIPPED_NAMES = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
    ".hypothesis", ".tox", ".nox", ".venv", "venv", "node_modules", "htmlcov", ".eggs",
})
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def is_config_file(name: str) -> bool:
    """True for a file name that configures Python, pytest or coverage."""
    return name in CONFIG_FILE_NAMES or name.endswith(CONFIG_SUFFIXES)


def _skipped(name: str) -> bool:
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES) or name.startswith(".coverage")


def scratch_copy(source: Path, target: Path) -> None:
    """Copy a workspace without VCS data or caches; symlinks leaving the workspace are dropped."""
    root = source.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        dropped = {name for name in names if _skipped(name)}
        for name in names:
            path = Path(folder, name)
            if path.is_symlink() and root not in path.resolve().parents:
                dropped.add(name)
        return dropped

    shutil.copytree(root, target, symlinks=True, ignore=ignore)


def _file_digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _walk(root: Path) -> Iterable[Path]:
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in dirs:
            if (base / name).is_symlink():
                yield base / name
        for name in files:
            yield base / name


def tree_manifest(root: Path) -> dict[str, str]:
    """SHA-256 of every file below `root`, keyed by its path relative to `root`."""
    return {path.relative_to(root).as_posix(): _file_digest(path) for path in _walk(root)}


def lock_manifest(root: Path, locked: list[str]) -> dict[str, str]:
    """Digests of the locked trees and of every configuration file anywhere in the workspace."""
    manifest = {}
    for rel, digest in tree_manifest(root).items():
        in_locked = any(rel == tree or rel.startswith(tree + "/") for tree in locked)
        if in_locked or is_config_file(rel.rsplit("/", 1)[-1]):
            manifest[rel] = digest
    return manifest


def manifest_digest(manifest: dict[str, str]) -> str:
    """One SHA-256 over a whole manifest (order-independent)."""
    lines = "".join(f"{path}\0{digest}\n" for path, digest in sorted(manifest.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or changed between two manifests."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def hash_violations(before: dict[str, str], after: dict[str, str], when: str) -> list[Violation]:
    """One `lock.hash_mismatch` violation per locked file that changed."""
    return [Violation(rule="lock.hash_mismatch", path=path,
                      message=f"locked file {path} was {_change_kind(before, after, path)} {when}")
            for path in changed_paths(before, after)]


def _change_kind(before: dict[str, str], after: dict[str, str], path: str) -> str:
    if path not in before:
        return "created"
    return "deleted" if path not in after else "modified"


@dataclass(frozen=True)
class RunResult:
    """What a locked child process did."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


class RoLock:
    """Runs a command with the workspace locked; subclasses decide how strongly."""

    backend = "abstract"
    os_level = False

    def _launcher(self, spec_path: Path) -> list[str]:
        return [sys.executable, "-I", "-S", str(NSEXEC), str(spec_path)]

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], rw: list[Path],
            ro: list[Path], hide: list[Path], timeout_s: float, memory_mb: int,
            spec_dir: Path) -> RunResult:
        """Run `argv` with only `rw` writable (OS backends), `hide` invisible, `ro` read-only."""
        spec = {"namespace": self.os_level, "argv": argv, "cwd": str(cwd), "memory_mb": memory_mb,
                "rw": [str(p) for p in rw], "ro": [str(p) for p in ro],
                "hide": [str(p) for p in hide], "setpriv": shutil.which("setpriv") or "setpriv"}
        handle, name = tempfile.mkstemp(prefix="lock-", suffix=".json", dir=spec_dir)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(spec, out)
        return run_process(self._launcher(Path(name)), env=env, timeout_s=timeout_s)


def run_process(command: list[str], *, env: dict[str, str], timeout_s: float) -> RunResult:
    """Run a command in its own session; on timeout kill the whole session."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True,
                            errors="replace")
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return RunResult(proc.returncode, out, err, timed_out=False)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return RunResult(proc.returncode, out, err, timed_out=True)


class HashOnlyLock(RoLock):
    """No OS lock: only hash anchoring and scope checks protect the locked trees."""

    backend = "hash-only"


class NamespaceLock(RoLock):
    """Linux mount namespace: read-only binds, hidden folders, no network, no capabilities."""

    backend = "namespace"
    os_level = True

    def _launcher(self, spec_path: Path) -> list[str]:
        return ["unshare", "--mount", "--net", "--", *super()._launcher(spec_path)]

    @staticmethod
    def available() -> str | None:
        """None when usable, else why not."""
        return _namespace_problem()


@functools.cache
def _namespace_problem() -> str | None:
    if os.geteuid() != 0:
        return "the namespace lock needs root (read-only bind mounts in a mount namespace)"
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"the namespace lock needs util-linux `{tool}` on PATH"
    probe = subprocess.run(["unshare", "--mount", "--net", "true"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        return f"`unshare --mount --net` failed here: {probe.stderr.strip()}"
    return None


class DockerLock(RoLock):
    """Docker engine: the run in a container with read-only volumes and network none."""

    backend = "docker"
    os_level = True
    image = os.environ.get("OOMRL_GATE_IMAGE", "python:3.11-slim")

    def __init__(self, client: Any) -> None:
        self.client = client

    @staticmethod
    def connect() -> Any:
        """A docker SDK client for a reachable engine; GateSetupError when there is none."""
        try:
            import docker

            client = docker.from_env(timeout=5)
            client.ping()
        except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; any means "no engine"
            raise GateSetupError(f"--lock docker: no reachable Docker engine ({exc})") from None
        return client

    def container_spec(self, argv: list[str], *, cwd: Path, env: dict[str, str], rw: list[Path],
                       ro: list[Path], memory_mb: int) -> dict[str, Any]:
        """Arguments of `containers.run`: the interpreter and workspace read-only, no network."""
        volumes = {str(p): {"bind": str(p), "mode": "ro"}
                   for p in {Path(sys.prefix), Path(sys.base_prefix), *ro}}
        volumes.update({str(p): {"bind": str(p), "mode": "rw"} for p in rw})
        return {"image": self.image, "command": argv, "working_dir": str(cwd),
                "environment": env, "volumes": volumes, "network_mode": "none",
                "mem_limit": f"{memory_mb}m", "read_only": True, "detach": True}

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], rw: list[Path],
            ro: list[Path], hide: list[Path], timeout_s: float, memory_mb: int,
            spec_dir: Path) -> RunResult:
        # `hide` needs nothing here: only the mounted folders exist in the container.
        spec = self.container_spec(argv, cwd=cwd, env=env, rw=rw, ro=[*ro, cwd],
                                   memory_mb=memory_mb)
        container = self.client.containers.run(**spec)
        try:
            status = container.wait(timeout=timeout_s)
            logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
            return RunResult(int(status.get("StatusCode", 1)), logs, "", timed_out=False)
        except Exception:  # noqa: BLE001 - a read timeout or a lost engine: stop the container
            container.kill()
            return RunResult(-9, "", "timed out", timed_out=True)
        finally:
            container.remove(force=True)


def select_lock(name: str) -> RoLock:
    """The backend asked for; refuse when an OS-level backend is not available."""
    if name == "hash-only":
        return HashOnlyLock()
    if name == "namespace":
        problem = NamespaceLock.available()
        if problem:
            raise GateSetupError(f"--lock namespace unavailable: {problem}; "
                                 "use --lock hash-only to run without an OS-level lock")
        return NamespaceLock()
    if name == "docker":
        return DockerLock(DockerLock.connect())
    raise GateSetupError(f"unknown lock backend {name!r}: choose namespace, docker or hash-only")
