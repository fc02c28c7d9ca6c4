"""`oomrl repair` and `oomrl versions` from the command line: reviews at the terminal and clear
errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oomrl.agent.llm import Transcript
from oomrl.ops.cli import app

AUTOPSY = {"account": "paper", "alert_id": "alert-cli-1"}
MANDATE = {
    "module": "strategies.daily_momentum",
    "text": "Weekly, capped",
    "constraints": {
        "rebalance": "weekly",
        "max_adv_participation": 0.05,
        "max_weekly_turnover": 0.3,
    },
}


@pytest.fixture(autouse=True)
def marked_paper(repair_home: Path) -> None:
    """paper marked on two sessions: the loss alert AUTOPSY is completed from them (the door refuses
    a loss alert for an account with no marked session: nothing to compute its metrics from)."""
    from oomrl.settings import get_settings
    from tests.agent.repair_helpers import mark_account

    mark_account(get_settings().ledger_url, "paper", ["2024-08-29", "2024-08-30"])


def write(path: Path, payload: Any) -> Path:
    path.write_text(json.dumps(payload))
    return path


def recorded_critic(tmp_path: Path) -> Path:
    """A transcript holding one critic answer and nothing for the other roles."""
    transcript = Transcript(tmp_path / "recorded.jsonl")
    transcript.append(
        "response",
        "critic",
        content=json.dumps(MANDATE),
        usage={"prompt_tokens": 1, "completion_tokens": 1},
    )
    return transcript.path


def repair(tmp_path: Path, *extra: str, stdin: str | None = None) -> Any:
    args = [
        "repair",
        "--autopsy",
        str(write(tmp_path / "a.json", AUTOPSY)),
        "--provider",
        "replay",
        "--transcript",
        str(recorded_critic(tmp_path)),
        *extra,
    ]
    return CliRunner().invoke(app, args, input=stdin)


def test_rejecting_at_the_terminal_changes_nothing(repair_home: Path, tmp_path: Path) -> None:
    result = repair(tmp_path, stdin="reject\nnot this week\n")
    assert result.exit_code == 0, result.output
    assert '"max_weekly_turnover": 0.3' in result.output  # the mandate is shown first
    assert "repair ended Rejected: not this week" in result.output


def test_no_answer_at_the_terminal_rejects(repair_home: Path, tmp_path: Path) -> None:
    result = repair(tmp_path, stdin="")
    assert result.exit_code == 0 and "use --auto-approve" in result.output


def test_an_unknown_answer_counts_as_a_rejection(repair_home: Path, tmp_path: Path) -> None:
    result = repair(tmp_path, stdin="maybe\n")
    assert result.exit_code == 0 and "unknown answer 'maybe'" in result.output


def test_editing_then_failing_reports_the_step(repair_home: Path, tmp_path: Path) -> None:
    node_id = "tests/strategies/test_daily_momentum.py::test_trades_every_new_session"
    result = repair(tmp_path, stdin=f"edit\nMonthly instead\nmonthly\n0.02\n0.1\n{node_id}\n")
    assert result.exit_code == 1
    assert "repair ended Tests rejected at test-genesis" in result.output
    assert "no more test_author responses" in result.output
    run_dir = Path(result.output.split("run folder: ")[1].split()[0])
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["mandate"]["constraints"] == {
        "rebalance": "monthly",
        "max_adv_participation": 0.02,
        "max_weekly_turnover": 0.1,
    }
    assert decision["mandate"]["text"] == "Monthly instead"
    assert decision["mandate"]["supersedes"] == [node_id]  # the prompt showed and took the list
    assert "superseded old tests" in result.output


def test_unreadable_or_invalid_autopsies_exit_1(repair_home: Path, tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["repair", "--autopsy", str(tmp_path / "nope.json")])
    assert missing.exit_code == 1 and "cannot read autopsy" in missing.output
    bad = write(tmp_path / "bad.json", {"account": "paper"})
    invalid = CliRunner().invoke(app, ["repair", "--autopsy", str(bad), "--auto-approve"])
    assert (
        invalid.exit_code == 1
        and "invalid loss alert" in invalid.output
        and "alert_id" in invalid.output
    )


@pytest.mark.slow
def test_versions_commands_report_errors(repair_home: Path) -> None:
    runner = CliRunner()
    init = runner.invoke(app, ["versions", "init"])
    assert init.exit_code == 0 and len(init.output.strip()) == 40
    assert runner.invoke(app, ["versions", "list"]).output.startswith("  v1 ")
    unknown = runner.invoke(app, ["versions", "show", "v7"])
    assert unknown.exit_code == 1 and "unknown strategy version 'v7'" in unknown.output
    nameless = runner.invoke(app, ["versions", "activate", "v1"])
    assert nameless.exit_code == 1 and "names no strategy" in nameless.output
    nothing = runner.invoke(app, ["versions", "rollback"])
    assert nothing.exit_code == 1 and "no active version" in nothing.output
    named = runner.invoke(app, ["versions", "activate", "v1", "--strategy", "daily_momentum"])
    assert named.exit_code == 0 and "paper now trades" in named.output
    assert runner.invoke(app, ["versions", "list"]).output.startswith("* v1 ")


def test_an_active_version_the_workspace_lacks_is_named_not_a_traceback(
    repair_home: Path, tmp_path: Path
) -> None:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.settings import get_settings

    runner = CliRunner()
    assert runner.invoke(app, ["versions", "init"]).exit_code == 0
    Ledger(get_settings().ledger_url).set_active_version("paper", "ab" * 20, "daily_momentum")
    said = "account 'paper' trades version abababababab, which the strategy workspace"
    rollback = runner.invoke(app, ["versions", "rollback"])
    assert (
        rollback.exit_code == 1 and said in rollback.output and "Traceback" not in rollback.output
    )
    failed = repair(tmp_path, "--auto-approve")
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    assert f"repair ended Failed at critic: UnknownActiveVersionError: {said}" in failed.output
