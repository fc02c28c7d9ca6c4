"""RO-Lock backends: how a locked run is started (bubblewrap, docker, or hash-only on the host)."""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardrails.errors import GateSetupError
from guardrails.settings import GateSettings

MIB = 1024 * 1024
# Size limits of every place a run can write (docs/gate.md "Limits").
# Its /tmp (HOME, pytest's tmp_path) and /dev/shm are tmpfs of a fixed size.
# That is bwrap `--size` (since 0.5), or docker's tmpfs `size=`.
# A writable bind (a run's results) is a tmpfs of its own. It is copied back to the host folder when
# the run ends. bwrap copies as root; docker reads a tmpfs volume back as an archive.
# No file may grow past FILE_BYTES (RLIMIT_FSIZE).
# A write past any of them fails (ENOSPC, EFBIG) inside the sandbox.
# The host's disk never sees more.
TMP_BYTES, SHM_BYTES, WRITABLE_BYTES, FILE_BYTES = 512 * MIB, 64 * MIB, 128 * MIB, 128 * MIB

# The environment of every locked process, pytest or not.
# Nothing in it tells a test run from the behaviour run.
# HOME and TMPDIR are the sandbox's fresh /tmp.
RUN_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}
LOCKS = ("bwrap", "docker", "namespace", "hash-only")


@dataclass(frozen=True)
class Bind:
    """A host path made visible to the locked process at `inside` (read-only unless writable)."""

    host: Path
    inside: str
    writable: bool = False


@dataclass(frozen=True)
class RunResult:
    """What a locked child process did."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


@dataclass
class Prepared:
    """A locked command ready to start: argv, environment, cwd, what to undo after it ends."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    cleanup: Any = None

    def done(self) -> None:
        """Undo what preparing the command set up (a sandbox's stage folder)."""
        if self.cleanup is not None:
            self.cleanup()


def run_process(
    command: list[str],
    *,
    env: dict[str, str],
    timeout_s: float,
    cwd: str | None = None,
    pass_fds: tuple[int, ...] = (),
) -> RunResult:
    """Run a command in its own session; on timeout kill the whole session."""
    proc = subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
        errors="replace",
        pass_fds=pass_fds,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return RunResult(proc.returncode, out, err, timed_out=False)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return RunResult(proc.returncode, out, err, timed_out=True)


def make_readable(root: Path) -> None:
    """Folders 0755 and files 0644 below `root`: the sandbox uid must read the copies it runs."""
    root.chmod(0o755)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            (Path(folder) / name).chmod(0o755)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o644)


def memory_limit(memory_mb: int) -> list[str]:
    """`prlimit` prefix capping the address space (and core dumps) of what it starts."""
    tool = shutil.which("prlimit")
    return [tool, f"--as={memory_mb * 1024 * 1024}", "--core=0", "--"] if tool else []


class RoLock:
    """hash-only: a plain child process on the host; only scope checks and hashes protect."""

    backend = "hash-only"
    os_level = False

    def python(self) -> str:
        """The interpreter the locked process runs (the venv's base interpreter, never the venv)."""
        return os.path.realpath(sys.executable)

    def site_paths(self) -> list[str]:
        """Where the locked process finds installed packages (given to it as import paths)."""
        return list(site.getsitepackages())

    def inside(self, bind: Bind) -> str:
        """The path under which the locked process sees `bind` (here: the host path itself)."""
        return str(bind.host)

    def env(self, scratch: Path) -> dict[str, str]:
        """The locked process's environment; `scratch` is a private host folder for HOME/TMPDIR."""
        return {**RUN_ENV, "HOME": str(scratch), "TMPDIR": str(scratch)}

    def prepare(
        self, argv: list[str], *, binds: list[Bind], cwd: str, env: dict[str, str], memory_mb: int
    ) -> Prepared:
        """The command that runs `argv` locked (here: binds are only a description, nothing is
        hidden)."""
        return Prepared([*memory_limit(memory_mb), *argv], env, cwd)

    def run(
        self,
        argv: list[str],
        *,
        binds: list[Bind],
        cwd: str,
        env: dict[str, str],
        timeout_s: float,
        memory_mb: int,
        pass_fds: tuple[int, ...] = (),
    ) -> RunResult:
        """Run `argv` locked until it ends (or the timeout kills its whole session)."""
        prepared = self.prepare(argv, binds=binds, cwd=cwd, env=env, memory_mb=memory_mb)
        try:
            return run_process(
                prepared.argv,
                env=prepared.env,
                timeout_s=timeout_s,
                cwd=prepared.cwd,
                pass_fds=pass_fds,
            )
        finally:
            prepared.done()


HashOnlyLock = RoLock


class DockerLock(RoLock):
    """Docker engine: the run in a container with only the binds, read-only, network none."""

    backend = "docker"
    os_level = True
    image = GateSettings().image  # OOMRL_GATE_IMAGE

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

    def inside(self, bind: Bind) -> str:
        return bind.inside

    def site_paths(self) -> list[str]:
        return [f"/site{i}" for i, _ in enumerate(site.getsitepackages())]

    def env(self, scratch: Path) -> dict[str, str]:
        return dict(RUN_ENV)

    def container_spec(
        self,
        argv: list[str],
        *,
        binds: list[Bind],
        cwd: str,
        env: dict[str, str],
        memory_mb: int,
        volumes: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Arguments of `containers.run`: interpreter, packages and binds, nothing else.

        Every place the run can write has a size. `volumes` maps each writable bind's inside path to
        the tmpfs volume standing in for it.
        """
        from docker.types import Ulimit

        mounts = {
            str(Path(sys.base_prefix).resolve()): {
                "bind": str(Path(sys.base_prefix).resolve()),
                "mode": "ro",
            }
        }
        mounts.update(
            {
                path: {"bind": f"/site{i}", "mode": "ro"}
                for i, path in enumerate(site.getsitepackages())
            }
        )
        for b in binds:  # a writable bind is never the host folder itself: its sized volume
            source = (volumes or {}).get(b.inside) if b.writable else str(b.host)
            if source is None:
                raise GateSetupError(
                    f"--lock docker: the writable bind {b.inside} has no sized volume"
                )
            mounts[source] = {"bind": b.inside, "mode": "rw" if b.writable else "ro"}
        return {
            "image": self.image,
            "command": argv,
            "working_dir": cwd,
            "environment": env,
            "volumes": mounts,
            "network_mode": "none",
            "mem_limit": f"{memory_mb}m",
            "read_only": True,
            "tmpfs": {"/tmp": f"size={TMP_BYTES},mode=1777", "/dev/shm": f"size={SHM_BYTES}"},
            "ulimits": [Ulimit(name="fsize", soft=FILE_BYTES, hard=FILE_BYTES)],
            "user": "65534:65534",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": 512,
            "detach": True,
        }

    def _sized_volumes(self, binds: list[Bind]) -> dict[str, Any]:
        """A tmpfs volume of WRITABLE_BYTES per writable bind, by its inside path."""
        return {
            b.inside: self.client.volumes.create(
                driver="local",
                driver_opts={
                    "type": "tmpfs",
                    "device": "tmpfs",
                    "o": f"size={WRITABLE_BYTES},uid=65534,gid=65534,mode=0700",
                },
            )
            for b in binds
            if b.writable
        }

    def _copy_back(self, container: Any, bind: Bind) -> None:
        """What the run wrote to a writable bind, into its host folder.

        The volume is read as a tar archive. It is unpacked with tarfile's `data` filter. So there
        are no absolute paths, no way out of the folder, no devices. Links stay links inside it.
        One pointing out is left behind.
        """
        import tarfile
        import tempfile

        stream, _ = container.get_archive(bind.inside)
        with tempfile.TemporaryFile() as archive:
            for chunk in stream:
                archive.write(chunk)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                top = Path(bind.inside).name
                members = []
                for member in tar.getmembers():  # the archive holds the folder itself: strip it
                    parts = Path(member.name).parts
                    if not parts or parts[0] != top or len(parts) == 1:
                        continue
                    member.name = str(Path(*parts[1:]))
                    members.append(member)
                Path(bind.host).mkdir(parents=True, exist_ok=True)
                tar.extractall(bind.host, members=members, filter=_kept)

    def prepare(
        self, argv: list[str], *, binds: list[Bind], cwd: str, env: dict[str, str], memory_mb: int
    ) -> Prepared:
        raise GateSetupError(
            "--lock docker cannot start a strategy host or pass it a channel yet: "
            "use bwrap (Debian bubblewrap)"
        )

    def run(
        self,
        argv: list[str],
        *,
        binds: list[Bind],
        cwd: str,
        env: dict[str, str],
        timeout_s: float,
        memory_mb: int,
        pass_fds: tuple[int, ...] = (),
    ) -> RunResult:
        if pass_fds:
            self.prepare(argv, binds=binds, cwd=cwd, env=env, memory_mb=memory_mb)
        volumes = self._sized_volumes(binds)
        try:
            spec = self.container_spec(
                argv,
                binds=binds,
                cwd=cwd,
                env=env,
                memory_mb=memory_mb,
                volumes={inside: v.name for inside, v in volumes.items()},
            )
            container = self.client.containers.run(**spec)
            try:
                try:
                    status = container.wait(timeout=timeout_s)
                except Exception:  # noqa: BLE001 - a read timeout or a lost engine: stop the container
                    container.kill()
                    return RunResult(-9, "", "timed out", timed_out=True)
                logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
                for bind in binds:
                    if bind.writable:
                        self._copy_back(container, bind)
                return RunResult(int(status.get("StatusCode", 1)), logs, "", timed_out=False)
            finally:
                container.remove(force=True)
        finally:
            for volume in volumes.values():
                volume.remove(force=True)


def _kept(member: Any, path: str) -> Any:
    """tarfile's `data` filter, skipping (not failing on) a member it refuses.

    A link out of the folder the run made is left behind. Nothing outside the folder is the run's
    to write.
    """
    import tarfile

    try:
        return tarfile.data_filter(member, path)
    except tarfile.FilterError:
        return None
