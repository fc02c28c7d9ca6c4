"""Lock backends: choosing one, the hash-only and docker runners, and the bwrap command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from guardrails.errors import GateSetupError
from guardrails.sandbox import bwrap as sandbox
from guardrails.sandbox.backends import select_lock
from guardrails.sandbox.bwrap import BwrapLock, _nested, _remove_stage, runtime_paths
from guardrails.sandbox.locks import Bind, DockerLock, HashOnlyLock, RoLock


def test_select_lock_defaults_to_bwrap_and_refuses_what_is_not_available(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert select_lock("hash-only").backend == "hash-only"
    with pytest.raises(GateSetupError, match="unknown lock backend"):
        select_lock("chroot")
    with pytest.raises(GateSetupError, match="no reachable Docker engine"):
        select_lock("docker")
    monkeypatch.setattr(sandbox, "_bwrap_problem", lambda: None)
    assert select_lock(None).backend == "bwrap"
    assert select_lock("namespace").backend == "bwrap"  # the former backend's name, same sandbox
    monkeypatch.setattr(sandbox, "_bwrap_problem", lambda: "`bwrap` is not installed")
    with pytest.raises(GateSetupError, match="--lock hash-only"):
        select_lock("bwrap")
    with pytest.raises(GateSetupError, match="install bubblewrap"):
        select_lock(None)


def test_bwrap_problem_names_the_missing_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = sandbox._bwrap_problem.__wrapped__
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool, path=None: None)
    assert "bubblewrap" in (probe() or "")
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool, path=None: "/usr/bin/" + tool)
    monkeypatch.setattr(
        BwrapLock,
        "run",
        lambda self, *a, **k: type(
            "Result", (), {"stdout": "", "stderr": "bwrap: setting up uid map: Permission denied"}
        )(),
    )
    assert "uid map" in (probe() or "")


@pytest.mark.slow
def test_hash_only_runs_on_the_host_with_limits(tmp_path: Path) -> None:
    lock = HashOnlyLock()
    env = lock.env(tmp_path)
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert lock.inside(Bind(tmp_path, "/workspace")) == str(tmp_path)
    big = lock.run(
        [lock.python(), "-I", "-c", "x = bytearray(900 * 1024 * 1024)"],
        binds=[],
        cwd=str(tmp_path),
        env=env,
        timeout_s=60,
        memory_mb=512,
    )
    assert big.returncode != 0 and "MemoryError" in big.stderr
    code = "import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"
    slow = lock.run(
        [lock.python(), "-I", "-c", code],
        binds=[],
        cwd=str(tmp_path),
        env=env,
        timeout_s=1,
        memory_mb=512,
    )
    assert slow.timed_out


def test_bwrap_command_isolates_binds_and_sets_the_environment(tmp_path: Path) -> None:
    lock = BwrapLock()
    binds = [Bind(tmp_path / "ws", "/workspace"), Bind(tmp_path / "results", "/results", True)]
    argv = lock.bwrap_argv(
        ["python", "x.py"],
        [("/stage/0", binds[0]), ("/stage/1", binds[1])],
        "/workspace",
        {"HOME": "/tmp"},
    )
    text = " ".join(argv)
    for option in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--tmpfs /tmp",
        "--tmpfs /dev/shm",
    ):
        assert option in text
    assert "--ro-bind /stage/0 /workspace" in text and "--bind /stage/1 /results" in text
    assert text.index("--remount-ro /") > text.index("--bind /stage/1")
    assert argv[-3:] == ["--", "python", "x.py"] and "--setenv HOME /tmp" in text
    assert lock.inside(binds[0]) == "/workspace" and lock.site_paths()[0] == "/site0"


def test_runtime_paths_hold_the_interpreter_and_its_libraries() -> None:
    paths, links = runtime_paths()
    assert os.path.realpath(sys.executable) in paths or any(
        os.path.realpath(sys.executable).startswith(p + "/") for p in paths
    )
    assert all(os.path.exists(p) for p in paths)
    assert all(os.path.islink(link) for _, link in links)
    assert _nested(["/a/b", "/a", "/c", "/a"]) == ["/a", "/c"]


def test_the_stage_is_removed_one_mount_point_at_a_time(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    (stage / "0").mkdir(parents=True)
    (stage / "1").touch()
    (stage / "2").mkdir()
    (stage / "2" / "still-mounted").touch()  # stands for a bind that did not go away
    _remove_stage(stage, [stage / "0", stage / "1", stage / "2"])
    assert sorted(p.name for p in stage.iterdir()) == ["2"]
    assert (stage / "2" / "still-mounted").exists()  # never deleted recursively


class _Container:
    """A container whose writable volume holds `written` (name -> bytes, or -> a link's target)."""

    def __init__(
        self, status: dict[str, int] | None, written: dict[str, bytes | str] | None = None
    ) -> None:
        self.status, self.killed, self.removed = status, False, False
        self.written = written or {}
        self.archived: list[str] = []

    def wait(self, timeout: float) -> dict[str, int]:
        if self.status is None:
            raise TimeoutError("read timed out")
        return self.status

    def logs(self, stdout: bool, stderr: bool) -> bytes:
        return b"3 passed"

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        """What the engine sends: a tar of the folder itself (its name first), in chunks."""
        import io
        import tarfile

        self.archived.append(path)
        top = Path(path).name
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            folder = tarfile.TarInfo(top)
            folder.type = tarfile.DIRTYPE
            tar.addfile(folder)
            for name, content in self.written.items():
                info = tarfile.TarInfo(f"{top}/{name}")
                if isinstance(content, str):
                    info.type, info.linkname = tarfile.SYMTYPE, content
                    tar.addfile(info)
                else:
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
        data = buffer.getvalue()
        return [data[:100], data[100:]], {"name": top}

    def kill(self) -> None:
        self.killed = True

    def remove(self, force: bool) -> None:
        self.removed = force


class _Volume:
    def __init__(self, name: str, options: dict[str, str]) -> None:
        self.name, self.options, self.removed = name, options, False

    def remove(self, force: bool) -> None:
        self.removed = force


class _Client:
    """The docker SDK calls the backend makes, recorded (no engine runs here)."""

    def __init__(
        self, status: dict[str, int] | None, written: dict[str, bytes | str] | None = None
    ) -> None:
        self.container = _Container(status, written)
        self.containers = self.volumes = self
        self.spec: dict[str, Any] = {}
        self.made: list[_Volume] = []

    def run(self, **spec: Any) -> _Container:
        self.spec = spec
        return self.container

    def create(self, driver: str, driver_opts: dict[str, str]) -> _Volume:
        assert driver == "local"
        self.made.append(_Volume(f"vol{len(self.made)}", driver_opts))
        return self.made[-1]


def test_docker_backend_mounts_only_the_binds_read_only_without_network(tmp_path: Path) -> None:
    client = _Client({"StatusCode": 0})
    lock: RoLock = DockerLock(client)
    binds = [Bind(tmp_path / "ws", "/workspace"), Bind(tmp_path / "results", "/results", True)]
    result = lock.run(
        ["python", "-V"],
        binds=binds,
        cwd="/workspace",
        env=lock.env(tmp_path),
        timeout_s=5,
        memory_mb=512,
    )
    assert result.returncode == 0 and result.stdout == "3 passed" and client.container.removed
    spec = client.spec
    assert spec["network_mode"] == "none" and spec["read_only"] and spec["mem_limit"] == "512m"
    assert spec["user"] == "65534:65534" and spec["cap_drop"] == ["ALL"]
    assert spec["volumes"][str(tmp_path / "ws")] == {"bind": "/workspace", "mode": "ro"}
    assert (
        str(tmp_path / "results") not in spec["volumes"]
    )  # the host folder is never the run's to write
    assert spec["volumes"]["vol0"] == {"bind": "/results", "mode": "rw"}
    assert set(spec["tmpfs"]) == {"/tmp", "/dev/shm"} and spec["environment"]["HOME"] == "/tmp"
    assert lock.inside(binds[0]) == "/workspace" and lock.site_paths() == ["/site0"]


def test_docker_backend_gives_every_writable_place_a_size(tmp_path: Path) -> None:
    from guardrails.sandbox.locks import FILE_BYTES, SHM_BYTES, TMP_BYTES, WRITABLE_BYTES

    client = _Client(
        {"StatusCode": 0},
        {"results.json": b'{"ok": 1}', "out": "/etc/passwd", "in": "results.json"},
    )
    binds = [Bind(tmp_path / "ws", "/workspace"), Bind(tmp_path / "results", "/results", True)]
    DockerLock(client).run(
        ["python", "-V"], binds=binds, cwd="/workspace", env={}, timeout_s=5, memory_mb=512
    )
    spec = client.spec
    assert spec["tmpfs"] == {"/tmp": f"size={TMP_BYTES},mode=1777", "/dev/shm": f"size={SHM_BYTES}"}
    assert [dict(u) for u in spec["ulimits"]] == [
        {"Name": "fsize", "Soft": FILE_BYTES, "Hard": FILE_BYTES}
    ]
    (volume,) = client.made
    assert volume.options["type"] == "tmpfs" and f"size={WRITABLE_BYTES}," in volume.options["o"]
    assert volume.removed and client.container.archived == ["/results"]
    # what the run wrote comes back into the host folder; a link out of it is left behind
    assert (tmp_path / "results" / "results.json").read_bytes() == b'{"ok": 1}'
    assert (tmp_path / "results" / "in").is_symlink() and not (
        tmp_path / "results" / "out"
    ).exists()


def test_docker_backend_refuses_a_writable_bind_without_a_sized_volume(tmp_path: Path) -> None:
    lock = DockerLock(_Client({"StatusCode": 0}))
    with pytest.raises(GateSetupError, match="/results has no sized volume"):
        lock.container_spec(
            ["python"], binds=[Bind(tmp_path, "/results", True)], cwd="/", env={}, memory_mb=64
        )


def test_docker_backend_kills_a_container_that_overruns(tmp_path: Path) -> None:
    client = _Client(None)
    result = DockerLock(client).run(
        ["sleep", "9"], binds=[], cwd="/", env={}, timeout_s=1, memory_mb=512
    )
    assert result.timed_out and client.container.killed and client.container.removed
