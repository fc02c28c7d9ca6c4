"""The bubblewrap sandbox: each locked run in a fresh minimal root, as an unprivileged host uid.

The root holds only the interpreter, the C libraries it links and the installed packages
(read-only). It holds the binds the run names: its workspace copy, the gate's files, its results
folder. /tmp and /dev/shm are fresh tmpfs. pid, ipc, net, uts, cgroup and user namespaces
are new. No further user namespace can be made.

Started by root, the chain has five links:
1. `unshare --mount`: a private mount table.
2. Bind every source onto a stage folder the sandbox uid may traverse.
3. `setpriv` to that uid with no capabilities.
4. `prlimit`.
5. `bwrap`.
So the host kernel sees an ordinary unprivileged uid. Files readable only by root stay unreadable
even inside a bind. The gate's own folders can stay private (0700) on the host.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from guardrails.sandbox.locks import (
    FILE_BYTES,
    RUN_ENV,
    SHM_BYTES,
    TMP_BYTES,
    WRITABLE_BYTES,
    Bind,
    Prepared,
    RoLock,
    memory_limit,
)
from guardrails.sandbox.tempdirs import OWNER_NOTE, owned_temp_dir
from guardrails.settings import GateSettings

SANDBOX_UID = GateSettings().sandbox_uid  # OOMRL_GATE_SANDBOX_UID
SITE_INSIDE = "/site"
# Top-level links of a merged-/usr system, recreated so the dynamic loader finds its libraries.
TOP_LINKS = ("/bin", "/lib", "/lib32", "/lib64", "/libx32")
ZONEINFO = "/usr/share/zoneinfo"
# bwrap options: every namespace new, no nested user namespaces, own session (no TIOCSTI).
ISOLATION = [
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--hostname",
    "sandbox",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--size",
    str(TMP_BYTES),
    "--tmpfs",
    "/tmp",
    "--size",
    str(SHM_BYTES),
    "--tmpfs",
    "/dev/shm",
    "--clearenv",
]


def file_limit() -> list[str]:
    """`prlimit` prefix capping the size of any file what it starts writes (RLIMIT_FSIZE)."""
    tool = shutil.which("prlimit")
    return [tool, f"--fsize={FILE_BYTES}", "--"] if tool else []


def _nested(paths: list[str]) -> list[str]:
    """`paths` without duplicates and without paths that lie inside another one."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


@functools.cache
def runtime_paths() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(folders and files the interpreter needs, top-level symlinks), each at its host path."""
    python = os.path.realpath(sys.executable)
    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    paths = [python, stdlib, str(sysconfig.get_config_var("DESTSHARED") or stdlib)]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        paths.append(str(sysconfig.get_config_var("LIBDIR")))
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    paths += [
        os.path.realpath(p)
        for p in (f"/usr/lib/{multiarch}", "/usr/lib64")
        if multiarch and os.path.isdir(p)
    ]
    ldd = subprocess.run(["ldd", python], capture_output=True, text=True, check=False).stdout
    for library in re.findall(r"(/\S+) \(0x", ldd):
        paths.append(os.path.dirname(os.path.realpath(library)))
    links = tuple((os.readlink(p), p) for p in TOP_LINKS if os.path.islink(p))
    return tuple(_nested([os.path.realpath(p) for p in paths if os.path.exists(p)])), links


class BwrapLock(RoLock):
    """bubblewrap (Debian `bubblewrap`): the default OS-level lock."""

    backend = "bwrap"
    os_level = True

    def site_paths(self) -> list[str]:
        return [f"{SITE_INSIDE}{i}" for i, _ in enumerate(_site_packages())]

    def inside(self, bind: Bind) -> str:
        return bind.inside

    def env(self, scratch: Path) -> dict[str, str]:
        return dict(RUN_ENV)

    def system_binds(self) -> list[Bind]:
        """The interpreter, its libraries and the installed packages, read-only."""
        paths, _ = runtime_paths()
        binds = [Bind(Path(p), p) for p in paths]
        binds += [Bind(Path(p), f"{SITE_INSIDE}{i}") for i, p in enumerate(_site_packages())]
        if os.path.isdir(ZONEINFO):
            binds.append(Bind(Path(ZONEINFO), ZONEINFO))
        return binds

    def bwrap_argv(
        self, argv: list[str], sources: list[tuple[str, Bind]], cwd: str, env: dict[str, str]
    ) -> list[str]:
        """The bwrap command: isolation, links, binds (each from its staged source), env, argv."""
        command = [_tool("bwrap"), *ISOLATION]
        for target, link in runtime_paths()[1]:
            command += ["--symlink", target, link]
        for source, bind in sources:
            command += ["--bind" if bind.writable else "--ro-bind", source, bind.inside]
        command += ["--remount-ro", "/"]  # the root itself: only /tmp, /dev/shm, results writable
        for key, value in sorted(env.items()):
            command += ["--setenv", key, value]
        return [*command, "--chdir", cwd, "--", *argv]

    def prepare(
        self, argv: list[str], *, binds: list[Bind], cwd: str, env: dict[str, str], memory_mb: int
    ) -> Prepared:
        every = [*self.system_binds(), *binds]
        limits = [*memory_limit(memory_mb), *file_limit()]
        if os.geteuid() != 0:  # already an unprivileged host uid: bind the host paths directly
            command = self.bwrap_argv(argv, [(str(b.host), b) for b in every], cwd, env)
            return Prepared([*limits, *command], {})
        stage = owned_temp_dir("oomrl-sandbox-")
        stage.chmod(0o755)
        points = [stage / str(i) for i in range(len(every))]
        try:
            for point, bind in zip(points, every, strict=True):
                point.mkdir() if bind.host.is_dir() else point.touch()
        except OSError:
            _remove_stage(stage, points)
            raise
        mounts = [
            (
                "mount -t tmpfs -o "
                f"size={WRITABLE_BYTES},mode=0700,uid={SANDBOX_UID},gid={SANDBOX_UID} "
                f"tmpfs {shlex.quote(str(p))}"
            )
            if b.writable
            else f"mount --bind -- {shlex.quote(str(b.host))} {shlex.quote(str(p))}"
            for p, b in zip(points, every, strict=True)
        ]
        # A writable bind's tmpfs back into its host folder once the run is over.
        # Links are kept as links.
        back = [
            f"cp -R -P -- {shlex.quote(str(p))}/. {shlex.quote(str(b.host))}/ || rc=1"
            for p, b in zip(points, every, strict=True)
            if b.writable
        ]
        drop = [
            _tool("setpriv"),
            f"--reuid={SANDBOX_UID}",
            f"--regid={SANDBOX_UID}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            *limits,
        ]
        inner = self.bwrap_argv(
            argv, [(str(p), b) for p, b in zip(points, every, strict=True)], cwd, env
        )
        run = shlex.join([*drop, *inner])
        script = (
            "set -e\n"
            + "\n".join(mounts)
            + (
                f"\nrc=0\n{run} || rc=$?\n" + "\n".join(back) + "\nexit $rc"
                if back
                else "\nexec " + run
            )
        )
        command = [
            _tool("unshare"),
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            script,
        ]
        return Prepared(
            command,
            {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            cleanup=lambda: _remove_stage(stage, points),
        )

    @staticmethod
    def available() -> str | None:
        """None when usable, else why not."""
        return _bwrap_problem()


def _site_packages() -> list[str]:
    import site

    return [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]


def _tool(name: str) -> str:
    return (
        shutil.which(name, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        or name
    )


def _remove_stage(stage: Path, points: list[Path]) -> None:
    """Remove the stage one mount point at a time, never recursively.

    If a bind were still mounted there, rmdir fails on it instead of deleting what it shows.
    """
    for point in [*points, stage / OWNER_NOTE]:
        with contextlib.suppress(OSError):
            point.rmdir() if point.is_dir() else point.unlink()
    with contextlib.suppress(OSError):
        stage.rmdir()


@functools.cache
def _bwrap_problem() -> str | None:
    needed = ["bwrap", "ldd"] + (["unshare", "setpriv", "mount"] if os.geteuid() == 0 else [])
    for tool in needed:
        if shutil.which(_tool(tool)) is None:
            hint = " (Debian package bubblewrap)" if tool == "bwrap" else ""
            return f"`{tool}` is not installed{hint}"
    probe = BwrapLock().run(
        [os.path.realpath(sys.executable), "-I", "-S", "-c", "print('ok')"],
        binds=[],
        cwd="/",
        env=dict(RUN_ENV),
        timeout_s=60,
        memory_mb=1024,
    )
    if probe.stdout.strip() != "ok":
        return f"a bubblewrap sandbox could not start here: {probe.stderr.strip()[-300:]}"
    return None
