"""Progress on the long commands (ingest, replay, repair, redteam): a transient bar on a terminal,
nothing on a pipe; the red team reports each finished case."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console

from oomrl.ops.commands import progress
from tests.cli.helpers import invoke
from tests.guardrails.test_redteam import _tiny_corpus


def test_the_bar_draws_on_a_terminal_and_goes_away() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    with progress("replay", total=3, console=terminal) as advance:
        for done, name in enumerate(["a", "b", "c"], 1):
            advance(done, 3, name)
        terminal.file.flush()
    drawn = screen.getvalue()
    assert "replay c" in drawn and "3/3" in drawn
    # Erased at the end
    assert drawn.rstrip().endswith("\x1b[2K") or "\x1b[1A" in drawn or "\x1b[2K" in drawn


def test_the_bar_stays_silent_on_a_pipe() -> None:
    pipe = io.StringIO()
    with progress("ingest", console=Console(file=pipe, force_terminal=False)) as advance:
        advance(5, 10, "600000.SH")
    assert pipe.getvalue() == ""


def test_redteam_reports_each_finished_case(tmp_path: Path) -> None:
    from guardrails.redteam import run_corpus

    corpus = _tiny_corpus(
        tmp_path,
        [
            "edit_tests,patches/d12_code_patch_edits_tests.diff,honest,code-patch,-,blocked",
            "edit_tests_2,patches/d12_code_patch_edits_tests.diff,honest,code-patch,-,blocked",
        ],
    )
    seen: list[tuple[int, int, str]] = []
    report = run_corpus(
        corpus,
        lock="hash-only",
        progress=lambda done, total, case: seen.append((done, total, case)),
    )
    assert sorted(seen) == [(1, 2, seen[0][2]), (2, 2, seen[1][2])]
    assert {case for _, _, case in seen} == {"edit_tests", "edit_tests_2"}
    assert report.attacks == (2, 2)


def test_redteam_set_up_errors_keep_the_gate_contract(tmp_path: Path) -> None:
    result = invoke("redteam", "--corpus", str(tmp_path / "none"), "--lock", "hash-only")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: cannot read the corpus index")


def test_the_repair_shows_its_steps() -> None:
    from oomrl.ops.commands.agent_cmds import _step_status

    screen = io.StringIO()
    seen: list[str] = []

    def step(a: int, b: int) -> int:
        # Drawn within ms when idle; a loaded machine may take seconds
        deadline = time.monotonic() + 60
        while "repair: critic" not in screen.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)  # the spinner draws from its own thread
        seen.append(screen.getvalue())
        return a + b

    assert _step_status(Console(file=screen, force_terminal=True))("critic", step, 2, 3) == 5
    assert "repair: critic" in seen[0]  # shown while the step runs
    assert _step_status(Console(file=io.StringIO()))("critic", step, 1, 1) == 2
