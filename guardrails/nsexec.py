"""Child-side launcher of the RO-Lock: mounts, resource limits and dropped privileges, then exec.

Runs as `python -I -S nsexec.py SPEC.json` (stdlib only), inside `unshare --mount --net` for the
namespace backend. In the new mount namespace it bind-mounts the writable folders first, hides
folders under empty read-only tmpfs, remounts every other mount read-only (the root file system
too), bind-mounts the locked trees read-only, drops every capability so the tested code cannot
remount anything, sets the memory limit and execs the command.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_RELATIME = 1024, 2048, 4096, 1 << 21
_KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
               "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
# Kernel file systems left as they are: /dev must stay usable (/dev/null, /dev/shm), /proc/sys
# is bound read-only on its own.
_SKIPPED_TREES = ("/proc", "/dev", "/sys")
SETUP_FAILED = 97


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n") \
        .replace("\\134", "\\")


def mount_points(mountinfo: str) -> list[tuple[str, int]]:
    """(mount point, flags to keep) of every mount listed in /proc/self/mountinfo."""
    points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        flags = sum(_KEPT_FLAGS.get(opt, 0) for opt in fields[5].split(","))
        points.append((_unescape(fields[4]), flags))
    return points


def readonly_plan(mountinfo: str, writable: list[str]) -> list[tuple[str, int]]:
    """Mounts to remount read-only: all but kernel trees and the writable binds."""
    plan = []
    for point, flags in mount_points(mountinfo):
        under_skipped = any(point == t or point.startswith(t + "/") for t in _SKIPPED_TREES)
        if not under_skipped and point not in writable:
            plan.append((point, flags))
    return plan


MountOp = tuple[str, str, "str | None", int, "str | None"]  # source, target, fstype, flags, data


def _bind_readonly(path: str, flags: int = 0) -> list[MountOp]:
    return [(path, path, None, MS_BIND, None),
            (path, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, None)]


def mount_plan(spec: dict[str, Any], mountinfo: str) -> list[MountOp]:
    """Every mount(2) call, in order: writable binds, read-only remounts, hidden, locked trees."""
    writable = [os.path.realpath(p) for p in spec["rw"]]
    ops: list[MountOp] = [(path, path, None, MS_BIND, None) for path in writable]
    ops += [(point, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, None)
            for point, flags in readonly_plan(mountinfo, writable)]
    ops += _bind_readonly("/proc/sys")
    ops += [("none", os.path.realpath(path), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
             "size=4k,mode=0555") for path in spec["hide"]]
    for path in spec["ro"]:
        ops += _bind_readonly(os.path.realpath(path))
    return ops


def run_mounts(libc: Any, ops: list[MountOp]) -> None:
    """Perform the mount calls; the first failure raises OSError naming the mount."""
    for source, target, fstype, flags, data in ops:
        code = libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                          ctypes.c_ulong(flags), data.encode() if data else None)
        if code != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def lock_filesystem(spec: dict[str, Any]) -> None:
    """Apply the spec's mounts in this (new) mount namespace."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        ops = mount_plan(spec, handle.read())
    run_mounts(ctypes.CDLL(None, use_errno=True), ops)


def main() -> None:
    """Read the spec named on the command line, lock, limit, drop privileges, exec."""
    with open(sys.argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    try:
        if spec["namespace"]:
            lock_filesystem(spec)
        limit = spec["memory_mb"] * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.chdir(spec["cwd"])
        argv = spec["argv"]
        if spec["namespace"]:
            argv = [spec["setpriv"], "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs",
                    "--", *argv]
        os.execv(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"oomrl-gate-lock-failed: {exc}\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED)


if __name__ == "__main__":
    main()
