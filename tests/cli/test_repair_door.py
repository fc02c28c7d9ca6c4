"""`oomrl repair` holds every input to the repair's door before anything is written, and the file
system's own failures (a read-only OOMRL_HOME, a full disk) are one clear line, never a
traceback."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import invoke, refused, snapshot, write_json

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ops" / "autopsy.json"
# The fixture alert dated on the one session the prepared home has marked for paper (2024-07-01).
AUTOPSY: dict[str, Any] = {**json.loads(FIXTURE.read_text()), "as_of": "2024-07-01"}
NO_IR = {
    **AUTOPSY,
    "trigger": {**AUTOPSY["trigger"], "rule": "ir_decay"},
    "metrics": {**AUTOPSY["metrics"], "rolling_ir_60d": None},
}


def repair(autopsy: Path, *extra: str) -> Any:
    return invoke(
        "repair", "--autopsy", str(autopsy), "--auto-approve", "--provider", "offline", *extra
    )


@pytest.mark.parametrize(
    ("payload", "fragments"),
    [
        ({**AUTOPSY, "account": "ghost"}, ["unknown account 'ghost'", "no such account"]),
        ({"alert_id": "ghost-1", "account": "ghost"}, ["unknown account 'ghost'"]),
        (
            {**AUTOPSY, "diagnostics": {**AUTOPSY["diagnostics"], "module": "strategies.nope"}},
            ["unknown strategy 'strategies.nope'"],
        ),
        ({**AUTOPSY, "as_of": "2024-13-45"}, ["invalid autopsy", "as_of"]),
        (
            {"alert_id": "bad-date-1", "account": "paper", "as_of": "18/10/2024"},
            ["invalid loss alert", "as_of"],
        ),
        (
            {"alert_id": "old-1", "account": "paper", "as_of": "0001-01-01"},
            [
                "invalid loss alert",
                "as_of 0001-01-01 is before the first XSHG session (1990-12-19)",
            ],
        ),
        (
            {"alert_id": "late-1", "account": "paper", "as_of": "2099-01-01"},
            [
                "invalid loss alert",
                "as_of 2099-01-01 is after today",
                "a session that has happened",
            ],
        ),
        (
            {**AUTOPSY, "as_of": "2099-01-01"},
            ["invalid autopsy", "as_of 2099-01-01 is after today"],
        ),
        (
            {"alert_id": "early-1", "account": "paper", "as_of": "2024-06-28"},
            [
                "alert dated 2024-06-28 is before account 'paper''s first session "
                "(2024-07-01; marked 2024-07-01.."
            ],
        ),
        (
            {**AUTOPSY, "as_of": "2024-06-28"},
            ["alert dated 2024-06-28 is before account 'paper''s first session"],
        ),
        (
            {"alert_id": "late-2", "account": "paper", "as_of": "2024-07-02"},
            [
                "alert dated 2024-07-02 is after account 'paper''s last marked session "
                "(2024-07-01; marked 2024-07-01..2024-07-01)"
            ],
        ),
        (
            {**AUTOPSY, "as_of": "2024-07-02"},
            ["alert dated 2024-07-02 is after account 'paper''s last marked session"],
        ),
        (
            NO_IR,
            [
                "alert dated 2024-07-01 (window from 2026-01-23) has no "
                "metrics.rolling_ir_60d, which rule 'ir_decay' "
                "reads (account 'paper' marked: 2024-07-01..2024-07-01)"
            ],
        ),
        (
            {**AUTOPSY, "metrics": {**AUTOPSY["metrics"], "daily_pnl": "nan"}},
            ["metrics.daily_pnl: Input should be a finite number"],
        ),
        (
            {**AUTOPSY, "metrics": {**AUTOPSY["metrics"], "drawdown": 1e308 * 10}},
            ["not valid JSON"],
        ),
        (
            {"account": "paper", "diagnostics": {"module": "strategies.daily_momentum"}},
            ["alert_id: Field required"],
        ),
        ({**AUTOPSY, "account": "p" * 65}, ["account: String should have at most 64"]),
        ([AUTOPSY], ["must be a JSON object, got list"]),
    ],
)
def test_refused_autopsies_write_nothing(
    home: Path, unchanged: None, tmp_path: Path, payload: Any, fragments: list[str]
) -> None:
    refused(repair(write_json(tmp_path / "autopsy.json", payload)), 1, *fragments)
    # No run folder (and `unchanged`: workspace, ledger as they were)
    assert list((home / "runs").iterdir()) == []


def test_a_loss_alert_for_an_account_never_marked_is_refused(home: Path, tmp_path: Path) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    ledger = Ledger(get_settings().ledger_url)
    # Opened, never marked: no metrics to complete the alert with
    ledger.open_account("fresh", 1_000_000)
    ledger.engine.dispose()
    refused(
        repair(
            write_json(
                tmp_path / "a.json",
                {"alert_id": "bare-1", "account": "fresh", "as_of": "2024-07-01"},
            )
        ),
        1,
        "alert dated 2024-07-01 carries no metrics and account 'fresh' has no marked "
        "session to compute "
        "them from (marked: none)",
    )
    assert list((home / "runs").iterdir()) == []


def test_an_override_account_must_exist_too(home: Path, unchanged: None, tmp_path: Path) -> None:
    refused(
        repair(write_json(tmp_path / "a.json", AUTOPSY), "--account", "ghost"),
        1,
        "unknown account 'ghost'",
    )


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"alert_id": "n-1", "account": "paper", "as_of": NaN}', "not valid JSON"),
        (b'{"alert_id": ' + b"9" * 100_000 + b', "account": "paper"}', "number out of range"),
        (
            b'{"alert_id": "n-1", "account": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
            "recursion limit exceeded",
        ),
        (b"\xff\xfe{}", "not valid JSON"),
    ],
)
def test_hostile_json_files_are_refused(
    home: Path, unchanged: None, tmp_path: Path, raw: bytes, fragment: str
) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(raw)
    refused(repair(path), 1, f"autopsy {path} is not valid JSON", fragment)


def test_a_10_mb_mandate_is_refused_before_it_is_read_or_printed(
    home: Path, unchanged: None, tmp_path: Path
) -> None:
    huge = write_json(tmp_path / "huge.json", {**AUTOPSY, "mandate": "m" * 10_000_000})
    output = refused(repair(huge), 1, f"autopsy {huge} is larger than 262144 bytes")
    assert len(output) < 500
    # Small file, long field
    long = write_json(tmp_path / "long.json", {**AUTOPSY, "mandate": "m" * 5_000})
    assert (
        len(refused(repair(long), 1, "mandate: String should have at most 4000 characters")) < 500
    )


def test_a_transcript_that_is_not_jsonl_is_refused(
    home: Path, unchanged: None, tmp_path: Path
) -> None:
    autopsy = write_json(tmp_path / "a.json", AUTOPSY)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"kind": "response", "role": "critic"}\nthis is not json\n')
    refused(
        invoke(
            "repair",
            "--autopsy",
            str(autopsy),
            "--provider",
            "replay",
            "--transcript",
            str(transcript),
        ),
        1,
        f"transcript {transcript} is not JSONL: line 2",
    )
    transcript.write_text("[1, 2]\n")
    refused(
        invoke(
            "repair",
            "--autopsy",
            str(autopsy),
            "--provider",
            "replay",
            "--transcript",
            str(transcript),
        ),
        1,
        "line 1 is not a JSON object",
    )
    refused(
        invoke("repair", "--autopsy", str(autopsy), "--provider", "replay"), 1, "needs a transcript"
    )
    refused(
        invoke(
            "repair",
            "--autopsy",
            str(autopsy),
            "--provider",
            "replay",
            "--transcript",
            str(tmp_path / "absent.jsonl"),
        ),
        1,
        "cannot read transcript",
    )


# -- the file system fails under the command -------------------------------------------------------
def _sandbox_available() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


needs_bwrap = pytest.mark.skipif(
    not _sandbox_available(), reason="bubblewrap cannot make mounts here"
)


def run_sandboxed(
    mounts: list[str], script: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`sh -c script` with the whole file system read-only except `mounts` (bubblewrap)."""
    command = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        *mounts,
        "sh",
        "-c",
        script,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **env}, timeout=300, check=False
    )


def ledger_dump(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return "\n".join(conn.iterdump())


@pytest.mark.slow
@needs_bwrap
def test_a_read_only_home_is_named(home: Path, tmp_path: Path) -> None:
    before = snapshot(home)
    autopsy = write_json(tmp_path / "a.json", {"alert_id": "ro-1", "account": "paper"})
    oomrl = f"{sys.executable} -m orchestration"
    (tmp_path / "tmp").mkdir()
    # No jail can be made inside this sandbox, and the strategy host needs a writable temporary
    # folder.
    hosted = {"OOMRL_UNSAFE_NO_JAIL": "1", "TMPDIR": str(tmp_path / "tmp")}
    for command, fragment, env in (
        (f"{oomrl} rebalance --as-of 2024-07-02", "the database is read-only", hosted),
        (f"{oomrl} repair --auto-approve --autopsy {autopsy}", "cannot write", hosted),
        (f"{oomrl} rebalance --as-of 2024-07-02", "No usable temporary directory", {}),
    ):
        done = run_sandboxed(
            ["--bind", str(tmp_path), str(tmp_path), "--ro-bind", str(home), str(home)],
            command,
            {"OOMRL_HOME": str(home), **env},
        )
        assert done.returncode == 1, done.stderr
        assert (
            "Traceback" not in done.stderr
            and done.stderr.startswith("error: ")
            and fragment in done.stderr
        )
    assert snapshot(home) == before


@pytest.mark.slow
@needs_bwrap
def test_a_full_disk_during_rebalance_is_named_and_the_ledger_is_unchanged(
    home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    (out / "full").mkdir(parents=True)
    size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) + 4 * 1024 * 1024
    script = (
        'mkdir "$OUT/full/home" && cp -a "$PREP/." "$OUT/full/home/" && '
        'dd if=/dev/zero of="$OUT/full/filler" bs=4k >/dev/null 2>&1; '
        'OOMRL_HOME="$OUT/full/home" "$PYTHON" -m orchestration rebalance --as-of 2024-07-02; '
        'echo "rc=$?" >"$OUT/rc"; rm -f "$OUT/full/filler"; cp "$OUT/full/home/ledger.db" '
        '"$OUT/ledger.db"'
    )
    (out / "tmp").mkdir()
    done = run_sandboxed(
        ["--bind", str(out), str(out), "--size", str(size), "--tmpfs", str(out / "full")],
        script,
        {
            "OUT": str(out),
            "PREP": str(home),
            "PYTHON": sys.executable,
            "OOMRL_UNSAFE_NO_JAIL": "1",
            "TMPDIR": str(out / "tmp"),
        },
    )
    assert (out / "rc").read_text().strip() == "rc=1", done.stderr
    assert done.stderr.startswith("error: disk full") and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert ledger_dump(out / "ledger.db") == ledger_dump(home / "ledger.db")


@pytest.mark.slow  # a repair up to its approval
def test_a_repair_of_an_account_another_repair_holds_is_refused_by_name(
    home: Path, tmp_path: Path
) -> None:
    from oomrl.repair.claims import ClaimBook
    from oomrl.settings import get_settings

    book = ClaimBook(get_settings().ledger_url).create()
    book.register("flow-run-1", "paper")  # a live repair (this process) through its gate
    assert book.acquire("flow-run-1", "paper") is None
    workspace = {k: v for k, v in snapshot(home).items() if k.startswith("workspace")}
    result = repair(
        write_json(tmp_path / "alert.json", {"alert_id": "busy-1", "account": "paper"}),
        "--wait",
        "0",
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    (run,) = (home / "runs").glob("repair-*")
    run_line, error = result.output.splitlines()
    assert run_line == f"run folder: {run}" and "Traceback" not in result.output
    assert error.startswith(
        "error: repair ended Account busy at claim: account paper is being repaired by run "
        "flow-run-1 "
        f"(pid {os.getpid()} on "
    ), (error, os.getpid())
    assert error.endswith("; not waiting (wait is 0)"), error
    assert {k: v for k, v in snapshot(home).items() if k.startswith("workspace")} == workspace
    assert [c.flow_run_id for c in book.live()] == ["flow-run-1"]  # its own claim went with it
    refused(
        invoke("repair", "--autopsy", str(tmp_path / "alert.json"), "--wait", "inf"),
        2,
        "Invalid value for '--wait'",
        "must be a finite number of seconds, got inf",
    )
    refused(
        invoke("repair", "--autopsy", str(tmp_path / "alert.json"), "--wait", "nan"),
        2,
        "Invalid value for '--wait'",
    )
