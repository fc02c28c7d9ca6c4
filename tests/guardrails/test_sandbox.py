"""Sandbox properties, each proven directly, and each shown to fail with the sandbox switched off.

Every probe runs exactly like a gate's test process (`runner.LockedRun`: the test trees of the run's
workspace copy at /workspace, S absent, the gate's files, a fresh results folder, the same
environment) once under bwrap,
where the property must hold, and once under hash-only, where the same probe must break it:
so none of these tests can pass with the sandbox gone.
"""

from __future__ import annotations

import inspect
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails.sandbox.bwrap import SANDBOX_UID, BwrapLock
from guardrails.sandbox.locks import HashOnlyLock, RoLock
from guardrails.sandbox.runner import GateDirs, LockedRun
from tests.guardrails.gate_helpers import servers

pytestmark = pytest.mark.skipif(
    BwrapLock.available() is not None, reason=f"bubblewrap unavailable: {BwrapLock.available()}"
)
REPO = Path(__file__).resolve().parents[2]
PROBE = '''
import json, os, socket, sys
spec = json.load(open(sys.argv[1]))
report = {}
for key, action in spec["actions"]:
    try:
        if key == "write":
            with open(action, "w") as handle:
                handle.write("x")
            report[action] = "written"
        elif key == "read":
            report[action] = open(action).read()
        elif key == "exists":
            report[action] = os.path.exists(action)
        elif key == "listdir":
            report[action] = sorted(os.listdir(action))
        elif key in ("tcp", "unix"):
            family = socket.AF_INET if key == "tcp" else socket.AF_UNIX
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(30)  # generous: the host server may wait for a loaded core
                sock.connect(tuple(action) if key == "tcp" else action)
                report[str(action)] = sock.recv(16).decode()
        elif key == "id":
            report["uid"], report["host"] = os.getuid(), os.uname().nodename
    except OSError as exc:
        report[str(action)] = f"error {exc.errno}"
open(spec["output"], "w").write(json.dumps(report))
'''
LOCKS = {"bwrap": BwrapLock, "hash-only": HashOnlyLock}


@pytest.fixture()
def dirs(tmp_path: Path) -> Iterator[GateDirs]:
    created = GateDirs.create()
    (created.cfg / "probe.py").write_text(PROBE)
    (created.cfg / "probe.py").chmod(0o644)
    created.ws.mkdir()
    for tree, text in (("strategies", "A = 1\n"), ("tests", "def test_a():\n    assert 1\n")):
        (created.ws / tree).mkdir()
        (created.ws / tree / "a.py").write_text(text)
    from guardrails.sandbox.locks import make_readable

    make_readable(created.ws)
    yield created
    created.remove()


def probe(
    lock: RoLock,
    dirs: GateDirs,
    actions: list[tuple[str, Any]],
    tag: str = "probe",
    heldout: Path | None = None,
) -> dict[str, Any]:
    """Run the probe as the gate runs a test process; its report (or {} when it wrote none)."""
    run = LockedRun(lock, dirs, dirs.ws, tag, heldout, ("tests",) if heldout is None else ())
    try:
        result = run.start(
            "probe.py",
            {"actions": actions, "output": run.path("/results", "probe.json")},
            timeout_s=60,
            memory_mb=1024,
        )
        report = run.read("probe.json")
        assert report is not None, result.stderr
        return report
    finally:
        run.close()


@pytest.fixture(params=sorted(LOCKS))
def lock(request: pytest.FixtureRequest) -> RoLock:
    return LOCKS[request.param]()


def test_a_test_process_cannot_write_outside_its_copy(
    lock: RoLock, dirs: GateDirs, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    target = outside / "planted.txt"
    report = probe(
        lock,
        dirs,
        [
            ("write", str(target)),
            ("write", str(REPO / "planted.txt")),
            ("write", "/usr/lib/planted.txt"),
        ],
    )
    if lock.os_level:
        assert not target.exists() and not (REPO / "planted.txt").exists()
        assert all(str(v).startswith("error") for v in report.values()), report
    else:  # the same probe without the sandbox writes to the host
        assert target.read_text() == "x" and report[str(target)] == "written"
        (REPO / "planted.txt").unlink(missing_ok=True)
        Path("/usr/lib/planted.txt").unlink(missing_ok=True)


def test_the_run_cannot_write_its_own_workspace_copy(lock: RoLock, dirs: GateDirs) -> None:
    run = LockedRun(lock, dirs, dirs.ws, "copy", trees=("tests",))
    inside = run.path("/workspace", "tests", "a.py")
    run.close()
    report = probe(lock, dirs, [("write", inside)])
    text = (dirs.ws / "tests" / "a.py").read_text()
    assert text == ("def test_a():\n    assert 1\n" if lock.os_level else "x")
    assert report[inside].startswith("error 30") if lock.os_level else report[inside] == "written"


def test_strategy_code_is_absent_from_the_test_process(lock: RoLock, dirs: GateDirs) -> None:
    # S runs in its strategy host: the test process's jail holds the test trees and not S
    run = LockedRun(lock, dirs, dirs.ws, "absent", trees=("tests",))
    source, tests = run.path("/workspace", "strategies"), run.path("/workspace", "tests", "a.py")
    run.close()
    report = probe(
        lock, dirs, [("exists", source), ("exists", tests), ("listdir", run.path("/workspace"))]
    )
    assert report[tests] is True
    if lock.os_level:
        assert report[source] is False and report[run.path("/workspace")] == ["tests"]
    else:
        assert report[source] is True and "strategies" in report[run.path("/workspace")]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the 0600 file")
def test_a_root_only_file_is_unreadable_even_when_bound(
    lock: RoLock, dirs: GateDirs, tmp_path: Path
) -> None:
    folder = tmp_path / "held"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "secret").write_text("root only")
    (folder / "secret").chmod(0o600)
    inside = "/heldout/secret" if lock.os_level else str(folder / "secret")
    report = probe(lock, dirs, [("read", inside), ("id", None)], heldout=folder)
    if lock.os_level:
        assert report[inside] == "error 13"  # EACCES: an unprivileged uid on the host itself
        assert report["uid"] == SANDBOX_UID != 0
    else:
        assert report[inside] == "root only" and report["uid"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to write in /root")
def test_nothing_of_root_run_home_or_the_project_is_visible(lock: RoLock, dirs: GateDirs) -> None:
    marker = Path("/root") / f".oomrl-probe-{secrets.token_hex(4)}"
    marker.write_text("private")
    marker.chmod(0o600)
    try:
        checks = [
            str(marker),
            "/run",
            "/home",
            str(REPO),
            str(REPO / "pyproject.toml"),
            "/etc/passwd",
        ]
        report = probe(lock, dirs, [("exists", path) for path in checks])
    finally:
        marker.unlink()
    if lock.os_level:
        assert not any(report.values()), report
    else:
        assert report[str(marker)] and report[str(REPO)] and report["/etc/passwd"]


def test_no_host_socket_is_reachable(lock: RoLock, dirs: GateDirs) -> None:
    with servers() as running:
        targets = running.targets
        report = probe(lock, dirs, targets)
    answers = [report[str(address)] for _, address in targets]
    if lock.os_level:
        assert all(answer.startswith("error") for answer in answers), report
    else:
        assert answers == ["host", "host", "host"]


def test_files_in_the_host_tmp_and_dev_shm_are_invisible(lock: RoLock, dirs: GateDirs) -> None:
    name = f"oomrl-probe-{secrets.token_hex(4)}"
    planted = [Path("/tmp") / name, Path("/dev/shm") / name]
    for path in planted:
        path.write_text("host")
        path.chmod(0o644)
    try:
        report = probe(
            lock, dirs, [("exists", str(p)) for p in planted] + [("read", str(p)) for p in planted]
        )
    finally:
        for path in planted:
            path.unlink()
    if lock.os_level:
        assert [report[str(p)] for p in planted] == ["error 2", "error 2"]
    else:
        assert [report[str(p)] for p in planted] == ["host", "host"]


def test_a_run_cannot_leave_anything_for_a_later_run(lock: RoLock, dirs: GateDirs) -> None:
    name = f"oomrl-left-{secrets.token_hex(4)}"
    run = LockedRun(lock, dirs, dirs.ws, "first", trees=("tests",))
    places = [
        f"{run.tmp}/{name}",
        f"/dev/shm/{name}",
        run.path("/results", name),
        run.path("/workspace", name),
        f"{run.lock.env(run.folder / 'home')['HOME']}/{name}",
    ]
    run.close()
    probe(lock, dirs, [("write", place) for place in places], tag="first")
    later = probe(lock, dirs, [("exists", place) for place in places], tag="second")
    try:
        if lock.os_level:
            assert not any(later.values()), later
        else:  # without the sandbox, /dev/shm (and more) is shared between runs
            assert later[f"/dev/shm/{name}"] is True
    finally:
        Path(f"/dev/shm/{name}").unlink(missing_ok=True)
        Path(f"/tmp/{name}").unlink(missing_ok=True)


def test_processes_and_host_name_of_the_host_are_hidden(lock: RoLock, dirs: GateDirs) -> None:
    report = probe(lock, dirs, [("listdir", "/proc"), ("id", None)])
    pids = {int(entry) for entry in report["/proc"] if entry.isdigit()}
    if lock.os_level:
        assert os.getpid() not in pids and len(pids) <= 3 and report["host"] == "sandbox"
    else:
        assert os.getpid() in pids and report["host"] == os.uname().nodename


def test_environment_is_the_same_for_every_locked_run(dirs: GateDirs) -> None:
    code = "import json, os, sys; print(json.dumps(dict(os.environ)))"
    lock = BwrapLock()
    result = lock.run(
        [lock.python(), "-I", "-S", "-c", code],
        binds=[],
        cwd="/",
        env=lock.env(dirs.root),
        timeout_s=60,
        memory_mb=1024,
    )
    env = json.loads(result.stdout)
    assert env["HOME"] == "/tmp" and "TMPDIR" not in env
    assert not any(key.startswith(("PYTEST", "COV", "OOMRL", "PREFECT")) for key in env)


@pytest.mark.slow
def test_memory_and_time_limits_apply_inside_the_sandbox(dirs: GateDirs) -> None:
    lock = BwrapLock()
    big = lock.run(
        [lock.python(), "-I", "-S", "-c", "x = bytearray(900 * 1024 * 1024)"],
        binds=[],
        cwd="/",
        env=lock.env(dirs.root),
        timeout_s=60,
        memory_mb=512,
    )
    assert big.returncode != 0 and "MemoryError" in big.stderr
    slow = lock.run(
        [lock.python(), "-I", "-S", "-c", "import time; time.sleep(30)"],
        binds=[],
        cwd="/",
        env=lock.env(dirs.root),
        timeout_s=1,
        memory_mb=512,
    )
    assert slow.timed_out


# The Done list of the sandbox: each property test, run once per lock (bwrap and hash-only).
PROPERTIES = (
    test_a_test_process_cannot_write_outside_its_copy,
    test_the_run_cannot_write_its_own_workspace_copy,
    test_strategy_code_is_absent_from_the_test_process,
    test_a_root_only_file_is_unreadable_even_when_bound,
    test_nothing_of_root_run_home_or_the_project_is_visible,
    test_no_host_socket_is_reachable,
    test_files_in_the_host_tmp_and_dev_shm_are_invisible,
    test_a_run_cannot_leave_anything_for_a_later_run,
    test_processes_and_host_name_of_the_host_are_hidden,
)


def test_every_property_is_also_proven_to_break_with_the_sandbox_off() -> None:
    # a property test without the `lock` parameter would never run with the sandbox switched off
    assert [
        test.__name__ for test in PROPERTIES if "lock" not in inspect.signature(test).parameters
    ] == []
    assert sorted(lock().os_level for lock in LOCKS.values()) == [False, True]


FILL = '''
import os, sys
report = {}
for place, count in (("/tmp", 600), ("/dev/shm", 80), ("/results", 150)):
    written = 0
    try:
        for i in range(count):
            with open(f"{place}/fill{i}", "wb") as handle:
                handle.write(b"x" * (1024 * 1024))
            written += 1
    except OSError as exc:
        report[place] = (written, exc.errno)
    else:
        report[place] = (written, 0)
try:
    with open("/tmp/big", "wb") as handle:
        handle.truncate(200 * 1024 * 1024)
        report["big"] = 0
except OSError as exc:
    report["big"] = exc.errno
print(report)
'''


def test_every_writable_place_has_a_size_limit(dirs: GateDirs) -> None:
    import ast
    import errno

    from guardrails.sandbox.locks import FILE_BYTES, MIB, SHM_BYTES, TMP_BYTES, WRITABLE_BYTES
    from guardrails.sandbox.runner import results_bytes

    run = LockedRun(BwrapLock(), dirs, dirs.ws, "fill", trees=("tests",))
    (dirs.cfg / "fill.py").write_text(FILL)
    (dirs.cfg / "fill.py").chmod(0o644)
    try:
        result = run.start("fill.py", {}, timeout_s=120, memory_mb=1024)
        report = ast.literal_eval(result.stdout.strip() or repr(result.stderr))
        used = results_bytes(run.results)
    finally:
        run.close()
    # each place takes what fits (less what it already holds) and no more: ENOSPC past it
    assert report["/tmp"][1] == report["/dev/shm"][1] == errno.ENOSPC, report
    assert report["/tmp"][0] <= TMP_BYTES // MIB and report["/dev/shm"][0] <= SHM_BYTES // MIB
    assert report["big"] == errno.EFBIG and 200 * MIB > FILE_BYTES
    if os.geteuid() == 0:  # the results tmpfs (root starts the sandbox): never more on the host
        assert (
            report["/results"][1] == errno.ENOSPC and report["/results"][0] <= WRITABLE_BYTES // MIB
        )
        assert WRITABLE_BYTES - MIB <= used <= WRITABLE_BYTES
