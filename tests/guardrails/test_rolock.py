"""RO-Lock: scratch copies, manifests, and the namespace / docker / hash-only backends for real."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from guardrails import nsexec, rolock
from guardrails.rolock import (
    DockerLock,
    HashOnlyLock,
    NamespaceLock,
    changed_paths,
    hash_violations,
    lock_manifest,
    manifest_digest,
    scratch_copy,
    select_lock,
    tree_manifest,
)
from guardrails.workspace import GateSetupError

needs_namespace = pytest.mark.skipif(NamespaceLock.available() is not None,
                                     reason="needs root and util-linux unshare")


def _tree(root: Path) -> Path:
    (root / "strategies").mkdir(parents=True)
    (root / "strategies" / "a.py").write_text("A = 1\n")
    (root / "tests" / "__pycache__").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    (root / "tests" / "__pycache__" / "test_a.cpython-311.pyc").write_bytes(b"\0")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")
    (root / "tests" / "conftest.py").write_text("")
    (root / "strategies" / "extra.pth").write_text("import os\n")
    (root / "pyproject.toml").write_text("[tool]\n")
    (root / ".coverage").write_text("data")
    return root


def test_scratch_copy_drops_vcs_caches_and_escaping_symlinks(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    (tmp_path / "outside.txt").write_text("secret")
    (src / "strategies" / "escape.txt").symlink_to(tmp_path / "outside.txt")
    (src / "strategies" / "inside.py").symlink_to(src / "strategies" / "a.py")
    scratch_copy(src, tmp_path / "dst")
    copied = sorted(tree_manifest(tmp_path / "dst"))
    assert copied == ["pyproject.toml", "strategies/a.py", "strategies/extra.pth",
                      "strategies/inside.py", "tests/conftest.py", "tests/test_a.py"]
    assert (tmp_path / "dst" / "strategies" / "inside.py").is_symlink()


def test_lock_manifest_covers_locked_trees_and_every_config_file(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    manifest = lock_manifest(root, ["tests"])
    assert {"tests/test_a.py", "tests/conftest.py", "strategies/extra.pth",
            "pyproject.toml"} <= set(manifest)
    assert "strategies/a.py" not in manifest
    # caches inside a locked tree are anchored too: a planted .pyc is a change
    assert "tests/__pycache__/test_a.cpython-311.pyc" in manifest


def test_manifest_differences_name_each_file_and_kind() -> None:
    before = {"a": "1", "b": "2", "c": "3"}
    after = {"a": "1", "b": "9", "d": "4"}
    assert changed_paths(before, after) == ["b", "c", "d"]
    messages = {v.path: v.message for v in hash_violations(before, after, "during the run")}
    assert "modified" in messages["b"] and "deleted" in messages["c"] and "created" in messages["d"]
    assert all(v.rule == "lock.hash_mismatch" for v in hash_violations(before, after, "x"))
    assert manifest_digest(before) == manifest_digest(dict(reversed(list(before.items()))))
    assert manifest_digest(before) != manifest_digest(after)


def test_symlinks_are_hashed_by_target(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "link").symlink_to("/etc/hostname")
    (tmp_path / "t" / "dirlink").symlink_to(tmp_path)
    manifest = tree_manifest(tmp_path / "t")
    assert manifest == {"link": "link:/etc/hostname", "dirlink": f"link:{tmp_path}"}


def _probe(lock: rolock.RoLock, tmp_path: Path, code: str, **kwargs: Any) -> rolock.RunResult:
    for name in ("rw", "ro", "hidden"):
        (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / "ro" / "f").write_text("locked")
    (tmp_path / "hidden" / "secret").write_text("held out")
    options: dict[str, Any] = {"cwd": tmp_path, "env": {"PATH": "/usr/bin:/bin"},
                               "rw": [tmp_path / "rw"], "ro": [tmp_path / "ro"],
                               "hide": [tmp_path / "hidden"], "timeout_s": 60, "memory_mb": 1024,
                               "spec_dir": tmp_path}
    options.update(kwargs)
    return lock.run([sys.executable, "-I", "-c", code], **options)


WRITE_PROBE = """
import os, socket, subprocess
for path in ('rw/ok', 'ro/f', 'elsewhere'):
    try:
        open(path, 'w').write('x')
        print('wrote', path)
    except OSError as exc:
        print('refused', path, exc.errno)
print('hidden', sorted(os.listdir('hidden')))
try:
    socket.create_connection(('192.0.2.1', 80), timeout=2)
except OSError as exc:
    print('network', exc.errno)
remount = subprocess.run(['mount', '-o', 'remount,rw', '/'], capture_output=True)
print('remount', remount.returncode)
"""


@needs_namespace
def test_namespace_lock_is_enforced_by_the_kernel(tmp_path: Path) -> None:
    result = _probe(NamespaceLock(), tmp_path, WRITE_PROBE)
    lines = result.stdout.splitlines()
    assert "wrote rw/ok" in lines
    assert "refused ro/f 30" in lines  # EROFS, though we are root
    assert "refused elsewhere 30" in lines  # everything outside the writable folders
    assert "hidden []" in lines
    assert "network 101" in lines  # ENETUNREACH: only a downed loopback exists
    assert "remount 0" not in lines  # capabilities are dropped: the lock cannot be undone
    assert (tmp_path / "ro" / "f").read_text() == "locked"
    assert not (tmp_path / "elsewhere").exists()


def test_hash_only_lock_runs_without_os_protection(tmp_path: Path) -> None:
    result = _probe(HashOnlyLock(), tmp_path, "open('ro/f', 'w').write('changed')")
    assert result.returncode == 0 and not result.timed_out
    assert (tmp_path / "ro" / "f").read_text() == "changed"


def test_memory_limit_applies_to_the_child(tmp_path: Path) -> None:
    result = _probe(HashOnlyLock(), tmp_path, "x = bytearray(900 * 1024 * 1024)", memory_mb=512)
    assert result.returncode != 0 and "MemoryError" in result.stderr


def test_timeout_kills_the_whole_session(tmp_path: Path) -> None:
    code = "import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"
    result = _probe(HashOnlyLock(), tmp_path, code, timeout_s=1)
    assert result.timed_out


@needs_namespace
def test_failed_lock_setup_reports_instead_of_running_unlocked(tmp_path: Path) -> None:
    result = _probe(NamespaceLock(), tmp_path, "print('ran')", rw=[tmp_path / "missing"])
    assert result.returncode == nsexec.SETUP_FAILED
    assert "oomrl-gate-lock-failed" in result.stderr and "ran" not in result.stdout


def test_mountinfo_plan_skips_kernel_trees_and_writable_binds() -> None:
    info = ("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
            "23 22 0:5 / /proc rw,nosuid - proc proc rw\n"
            "24 22 0:6 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw\n"
            "25 22 0:7 / /mnt/with\\040space ro,nosuid,nodev,noexec - tmpfs none ro\n"
            "26 22 8:1 /tmp/x/results /tmp/x/results rw - ext4 /dev/vda rw\n"
            "short line")
    plan = nsexec.readonly_plan(info, ["/tmp/x/results"])
    assert [point for point, _ in plan] == ["/", "/mnt/with space"]
    flags = dict(plan)
    assert flags["/"] == nsexec.MS_RELATIME
    assert flags["/mnt/with space"] == nsexec.MS_NOSUID | nsexec.MS_NODEV | nsexec.MS_NOEXEC


def test_select_lock_refuses_what_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    assert select_lock("hash-only").backend == "hash-only"
    with pytest.raises(GateSetupError, match="unknown lock backend"):
        select_lock("chroot")
    with pytest.raises(GateSetupError, match="no reachable Docker engine"):
        select_lock("docker")
    monkeypatch.setattr(rolock, "_namespace_problem", lambda: "needs root")
    with pytest.raises(GateSetupError, match="--lock hash-only"):
        select_lock("namespace")


def test_namespace_problem_names_the_missing_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = rolock._namespace_problem.__wrapped__
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in (probe() or "")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(rolock.shutil, "which", lambda tool: None)
    assert "unshare" in (probe() or "")
    monkeypatch.setattr(rolock.shutil, "which", lambda tool: "/usr/bin/" + tool)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(rolock.subprocess, "run", lambda *a, **k: type(
        "Done", (), {"returncode": 1, "stderr": "unshare: Operation not permitted"})())
    assert "Operation not permitted" in (probe() or "")


class _Container:
    def __init__(self, status: dict[str, int] | None) -> None:
        self.status, self.killed, self.removed = status, False, False

    def wait(self, timeout: float) -> dict[str, int]:
        if self.status is None:
            raise TimeoutError("read timed out")
        return self.status

    def logs(self, stdout: bool, stderr: bool) -> bytes:
        return b"3 passed"

    def kill(self) -> None:
        self.killed = True

    def remove(self, force: bool) -> None:
        self.removed = force


class _Client:
    """The two docker SDK calls the backend makes, recorded (no engine runs in this sandbox)."""

    def __init__(self, status: dict[str, int] | None) -> None:
        self.container = _Container(status)
        self.containers = self
        self.spec: dict[str, Any] = {}

    def run(self, **spec: Any) -> _Container:
        self.spec = spec
        return self.container


def test_docker_backend_mounts_read_only_without_network(tmp_path: Path) -> None:
    client = _Client({"StatusCode": 0})
    lock = DockerLock(client)
    result = lock.run(["python", "-V"], cwd=tmp_path / "ws", env={"A": "1"},
                      rw=[tmp_path / "results"], ro=[tmp_path / "cfg"], hide=[], timeout_s=5,
                      memory_mb=512, spec_dir=tmp_path)
    assert result.returncode == 0 and result.stdout == "3 passed" and client.container.removed
    spec = client.spec
    assert spec["network_mode"] == "none" and spec["read_only"] and spec["mem_limit"] == "512m"
    assert spec["volumes"][str(tmp_path / "ws")]["mode"] == "ro"
    assert spec["volumes"][str(tmp_path / "cfg")]["mode"] == "ro"
    assert spec["volumes"][str(tmp_path / "results")]["mode"] == "rw"
    assert spec["volumes"][sys.prefix]["mode"] == "ro"


def test_docker_backend_kills_a_container_that_overruns(tmp_path: Path) -> None:
    client = _Client(None)
    result = DockerLock(client).run(["sleep", "9"], cwd=tmp_path, env={}, rw=[], ro=[], hide=[],
                                    timeout_s=1, memory_mb=512, spec_dir=tmp_path)
    assert result.timed_out and client.container.killed and client.container.removed


def test_mount_plan_orders_binds_remounts_hides_and_locks(tmp_path: Path) -> None:
    info = ("22 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n"
            "23 22 0:5 / /proc rw - proc proc rw\n")
    spec = {"rw": [str(tmp_path / "results")], "hide": [str(tmp_path / "held")],
            "ro": [str(tmp_path / "ws" / "tests")]}
    ops = nsexec.mount_plan(spec, info)
    ro = nsexec.MS_BIND | nsexec.MS_REMOUNT | nsexec.MS_RDONLY
    assert ops == [
        (str(tmp_path / "results"), str(tmp_path / "results"), None, nsexec.MS_BIND, None),
        ("/", "/", None, ro | nsexec.MS_RELATIME, None),
        ("/proc/sys", "/proc/sys", None, nsexec.MS_BIND, None),
        ("/proc/sys", "/proc/sys", None, ro, None),
        ("none", str(tmp_path / "held"), "tmpfs", nsexec.MS_RDONLY | nsexec.MS_NOSUID
         | nsexec.MS_NODEV, "size=4k,mode=0555"),
        (str(tmp_path / "ws" / "tests"), str(tmp_path / "ws" / "tests"), None, nsexec.MS_BIND,
         None),
        (str(tmp_path / "ws" / "tests"), str(tmp_path / "ws" / "tests"), None, ro, None)]


class _Libc:
    """Records mount(2) calls; fails the one named in `fail_on` (no mount happens in-process)."""

    def __init__(self, fail_on: str = "") -> None:
        self.calls: list[tuple[bytes, bytes, bytes | None, int, bytes | None]] = []
        self.fail_on = fail_on

    def mount(self, source: bytes, target: bytes, fstype: bytes | None, flags: Any,
              data: bytes | None) -> int:
        self.calls.append((source, target, fstype, flags.value, data))
        return -1 if target.decode() == self.fail_on else 0


def test_run_mounts_passes_flags_and_stops_at_the_first_failure() -> None:
    libc = _Libc(fail_on="/b")
    ops = [("/a", "/a", None, nsexec.MS_BIND, None), ("none", "/b", "tmpfs", 1, "size=4k"),
           ("/c", "/c", None, nsexec.MS_BIND, None)]
    with pytest.raises(OSError, match="mount none on /b"):
        nsexec.run_mounts(libc, ops)
    assert libc.calls == [(b"/a", b"/a", None, nsexec.MS_BIND, None),
                          (b"none", b"/b", b"tmpfs", 1, b"size=4k")]
