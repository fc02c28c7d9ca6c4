"""A promotion killed for real (SIGKILL) at every git and ledger step: the next command, in a fresh
process, leaves branch, tags, notes and the ledger's active pointer agreeing, and the next promotion
lands normally."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from oomrl.portfolio.ledger import Ledger
from oomrl.repair import promotion
from oomrl.repair.promotion import JOURNAL, STEPS, has_notes
from oomrl.repair.versions import StrategyVersions
from tests.conftest import REPO_ROOT
from tests.test_versions import make_bundle

ACCOUNT = "paper"
# Before the ledger write the promotion is undone; from it on, it stands.
LANDED = {"ledger", "done"}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOMRL_")}
    return {**env, "OOMRL_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}


def _killed_promotion(home: Path, candidate: Path, step: str, probation: int = 0) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.agent.kill_at",
            step,
            "promote",
            str(home),
            str(candidate),
            ACCOUNT,
            *([str(probation)] if probation else []),
        ],
        cwd=REPO_ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def _oomrl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestration", *args],
        cwd=REPO_ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _candidate(
    versions: StrategyVersions, tmp_path: Path, weight: str, at: str | None = None
) -> Path:
    clone = versions.clone_to(tmp_path / f"candidate-{weight}", at=at)
    (clone / "strategies" / "alpha.py").write_text(f"def weight() -> float:\n    return {weight}\n")
    return clone


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """OOMRL_HOME with a workspace (v1, the tiny bundle) and `paper` trading v1."""
    home = tmp_path / "home"
    versions = StrategyVersions(home / "workspace", Ledger(f"sqlite:///{home / 'ledger.db'}"))
    versions.ledger.create_schema()  # type: ignore[union-attr]
    versions.init(make_bundle(tmp_path / "bundle"))
    versions.activate("v1", ACCOUNT, "alpha")
    return home


def _versions(home: Path) -> StrategyVersions:
    return StrategyVersions(home / "workspace", Ledger(f"sqlite:///{home / 'ledger.db'}"))


@pytest.mark.slow  # three fresh processes per step
@pytest.mark.parametrize(
    ("step", "off_branch"),
    [*((step, False) for step in STEPS), ("fetch", True), ("tag", True), ("ledger", True)],
)
def test_a_promotion_killed_at_any_step_is_recovered_by_the_next_command(
    home: Path, tmp_path: Path, step: str, off_branch: bool
) -> None:
    versions = _versions(home)
    if off_branch:  # another account's v2 moved the branch; paper's candidate is based on v1
        promotion.promote(
            versions, _candidate(versions, tmp_path, "0.75"), "Other's repair", {}, "other", "alpha"
        )
    tags_before, head_before = [v.tag for v in versions.list()], versions.head()
    candidate = _candidate(versions, tmp_path, "0.5", at="v1")
    sha = versions.git("rev-parse", "HEAD", cwd=candidate)

    _killed_promotion(home, candidate, step)
    pending = (home / "workspace" / ".git" / JOURNAL).exists()
    assert pending == (STEPS.index("journal") <= STEPS.index(step) < STEPS.index("done"))

    # The next command, in a fresh process, puts it together and says what it did.
    checked = _oomrl(home, "versions", "check")
    assert checked.returncode == 0, checked.stderr
    assert "versions consistent" in checked.stdout and "Traceback" not in checked.stderr
    assert ("recovered: the promotion of" in checked.stderr) == pending
    versions = _versions(home)
    assert promotion.check(versions) == []
    assert not (home / "workspace" / ".git" / JOURNAL).exists()
    promoted = [v for v in versions.list() if v.tag not in tags_before]
    if step in LANDED:
        assert [v.tag for v in promoted] == [f"v{len(tags_before) + 1}"]
        assert versions.ledger.active_version(ACCOUNT) == promoted[0].sha  # type: ignore[union-attr]
        assert versions.metadata(promoted[0].tag)["by"] == "kill_at"
        expected_head = head_before if off_branch else promoted[0].sha
    else:
        assert promoted == [] and versions.ledger.active_version(ACCOUNT) == versions.resolve("v1")  # type: ignore[union-attr]
        expected_head = head_before
        assert not has_notes(versions, sha)
    assert versions.head() == expected_head

    # The next promotion lands normally: the next tag, the branch forward, the ledger on it.
    base = versions.ledger.active_version(ACCOUNT)  # type: ignore[union-attr]
    after = promotion.promote(
        versions,
        _candidate(versions, tmp_path, "0.25", at=base),
        "Next repair",
        {"n": 2},
        ACCOUNT,
        "alpha",
    )
    assert after.tag == f"v{len(versions.list())}" and after.active
    assert versions.ledger.active_version(ACCOUNT) == after.sha  # type: ignore[union-attr]
    assert promotion.check(versions) == []


@pytest.mark.slow
# The commit point is the probation's ledger write
@pytest.mark.parametrize("step", ["notes", "ledger"])
def test_a_probation_killed_around_its_commit_point_is_recovered_by_the_next_command(
    home: Path, tmp_path: Path, step: str
) -> None:
    from oomrl.repair.probation import probations

    versions = _versions(home)
    versions.ledger.open_account(ACCOUNT, 1_000_000)  # type: ignore[union-attr]
    candidate = _candidate(versions, tmp_path, "0.5", at="v1")
    _killed_promotion(home, candidate, step, probation=5)
    checked = _oomrl(home, "versions", "check")
    assert checked.returncode == 0, checked.stderr
    assert "recovered: the promotion of v2" in checked.stderr
    versions = _versions(home)
    ledger = versions.ledger
    assert promotion.check(versions) == [] and ledger.active_version(ACCOUNT) == versions.resolve(
        "v1"
    )  # type: ignore[union-attr]
    found = probations(ledger, ACCOUNT)  # type: ignore[arg-type]
    if step in LANDED:  # the shadow book and its probation exist together, or neither does
        assert [(p.tag, p.status, p.sessions) for p in found] == [("v2", "open", 5)]
        assert ledger.active_version(f"{ACCOUNT}~v2") == versions.resolve("v2")  # type: ignore[union-attr]
    else:
        assert found == [] and f"{ACCOUNT}~v2" not in ledger.account_names()  # type: ignore[union-attr]
        assert [v.tag for v in versions.list()] == ["v1"]


def test_a_journal_that_is_not_one_is_named(home: Path) -> None:
    (home / "workspace" / ".git" / JOURNAL).write_text("{not json")
    done = _oomrl(home, "versions", "list")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (
        done.stderr.startswith("error: ") and f"{JOURNAL} is not a promotion journal" in done.stderr
    )
