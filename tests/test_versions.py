"""Strategy versions in the workspace git repo: init, promote in one transaction, list, show, activate, rollback."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomrl.portfolio.ledger import Ledger
from oomrl.versions import GUARD_PYPROJECT, StrategyVersions, VersionError


class FlakyLedger(Ledger):
    """The real SQL ledger; `fail_next` makes the next version write fail (a crash mid-promotion)."""

    fail_next = False

    def set_active_version(self, account: str, sha: str, name: str) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("ledger write failed")
        super().set_active_version(account, sha, name)


def make_bundle(root: Path) -> Path:
    (root / "strategies").mkdir(parents=True)
    (root / "strategies" / "__init__.py").write_text("")
    (root / "strategies" / "alpha.py").write_text("def weight() -> float:\n    return 1.0\n")
    (root / "strategies" / "__pycache__").mkdir()
    (root / "strategies" / "__pycache__" / "alpha.cpython-311.pyc").write_bytes(b"junk")
    (root / "tests" / "strategies").mkdir(parents=True)
    (root / "tests" / "strategies" / "test_alpha.py").write_text(
        "from strategies.alpha import weight\n\ndef test_weight():\n    assert weight() == 1.0\n")
    return root


@pytest.fixture()
def versions(tmp_path: Path) -> StrategyVersions:
    ledger = FlakyLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.create_schema()
    store = StrategyVersions(tmp_path / "home" / "workspace", ledger)
    store.init(make_bundle(tmp_path / "bundle"))
    return store


def candidate_with(versions: StrategyVersions, tmp_path: Path, body: str) -> Path:
    clone = versions.clone_to(tmp_path / "candidate")
    (clone / "strategies" / "alpha.py").write_text(body)
    return clone


def test_init_copies_bundle_with_guard_and_tags_v1(versions: StrategyVersions) -> None:
    ws = versions.workspace
    assert (ws / "strategies" / "alpha.py").exists() and (ws / "tests" / "strategies").is_dir()
    assert not (ws / "strategies" / "__pycache__").exists()
    assert (ws / "pyproject.toml").read_text() == GUARD_PYPROJECT
    assert [v.tag for v in versions.list()] == ["v1"]
    assert versions.git("log", "-1", "--format=%an <%ae>") == "oomrl <oomrl@localhost>"
    assert versions.init() == versions.head()  # idempotent


def test_init_refuses_a_bundle_without_strategies(tmp_path: Path) -> None:
    store = StrategyVersions(tmp_path / "ws")
    with pytest.raises(VersionError, match="does not exist"):
        store.init(tmp_path / "empty")
    assert not (tmp_path / "ws").exists()
    with pytest.raises(VersionError, match="oomrl versions init"):
        store.head()


def test_promote_commits_tags_attaches_metadata_and_activates(
        versions: StrategyVersions, tmp_path: Path) -> None:
    first = versions.head()
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.5\n")
    info = versions.promote(clone, "Repair alpha", {"autopsy": {"alert_id": "a1"}}, "acct", "alpha")
    assert info.tag == "v2" and info.active and info.strategy == "alpha"
    assert versions.head() == info.sha != first
    assert "0.5" in (versions.workspace / "strategies" / "alpha.py").read_text()
    assert versions.metadata("v2")["autopsy"] == {"alert_id": "a1"}
    assert "Oomrl-Strategy: alpha" in versions.show("v2")["message"]
    assert "alpha.py" in versions.show("v2", "acct")["diffstat"]
    assert versions.show("v1")["metadata"] == {}
    assert [(v.tag, v.active) for v in versions.list("acct")] == [("v1", False), ("v2", True)]


def test_failed_activation_leaves_workspace_and_ledger_untouched(
        versions: StrategyVersions, tmp_path: Path) -> None:
    versions.activate("v1", "acct", "alpha")
    before = versions.head()
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.0\n")
    versions.ledger.fail_next = True  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match="ledger write failed"):
        versions.promote(clone, "Broken", {"x": 1}, "acct", "alpha")
    assert versions.head() == before
    assert "1.0" in (versions.workspace / "strategies" / "alpha.py").read_text()
    assert [v.tag for v in versions.list()] == ["v1"]
    assert versions.ledger.active_version("acct") == before  # type: ignore[union-attr]
    assert versions.git("status", "--porcelain") == ""


def test_rollback_activates_the_previous_version(versions: StrategyVersions, tmp_path: Path) -> None:
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.25\n")
    versions.promote(clone, "Repair", {}, "acct", "alpha")
    sha_v1 = versions.resolve("v1")
    assert versions.rollback("acct") == sha_v1
    assert versions.ledger.active_version("acct") == sha_v1  # type: ignore[union-attr]
    with pytest.raises(VersionError, match="nothing to roll back"):
        versions.rollback("acct")
    with pytest.raises(VersionError, match="no active version"):
        versions.rollback("other")


def test_activate_needs_a_known_ref_and_a_strategy(versions: StrategyVersions) -> None:
    with pytest.raises(VersionError, match="unknown strategy version 'v9'"):
        versions.activate("v9", "acct", "alpha")
    with pytest.raises(VersionError, match="names no strategy"):
        versions.activate("v1", "acct")
    assert versions.activate(versions.head()[:10], "acct", "alpha") == versions.head()


def test_operations_without_a_ledger_refuse(tmp_path: Path) -> None:
    store = StrategyVersions(tmp_path / "ws")
    store.init(make_bundle(tmp_path / "bundle"))
    with pytest.raises(VersionError, match="needs a ledger"):
        store.activate("v1", "acct", "alpha")
    with pytest.raises(VersionError, match="needs a ledger"):
        store.rollback("acct")


def test_materialize_exports_exactly_that_commit(versions: StrategyVersions, tmp_path: Path) -> None:
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.75\n")
    versions.promote(clone, "Repair", {}, "acct", "alpha")
    old = versions.materialize("v1")
    assert "1.0" in (old / "strategies" / "alpha.py").read_text()
    assert "0.75" in (versions.materialize("v2") / "strategies" / "alpha.py").read_text()
    assert versions.materialize("v1") == old  # cached
    assert not (old / ".git").exists()


def test_nothing_to_commit_changes_nothing(versions: StrategyVersions, tmp_path: Path) -> None:
    clone = versions.clone_to(tmp_path / "same")
    with pytest.raises(VersionError, match="commit"):
        versions.promote(clone, "No change", {}, "acct", "alpha")
    assert [v.tag for v in versions.list()] == ["v1"]


def test_rollback_refuses_an_untagged_active_commit(versions: StrategyVersions, tmp_path: Path) -> None:
    clone = versions.clone_to(tmp_path / "two-commits")
    (clone / "tests" / "strategies" / "test_more.py").write_text("def test_more():\n    assert 2 > 1\n")
    versions.git("add", "-A", cwd=clone)
    versions.git("commit", "-q", "-m", "Tests first", cwd=clone)
    (clone / "strategies" / "alpha.py").write_text("def weight() -> float:\n    return 0.1\n")
    versions.promote(clone, "Repair", {}, "acct", "alpha")
    versions.activate("v2~1", "acct", "alpha")  # the tests-first commit carries no tag
    with pytest.raises(VersionError, match="is not a tagged version"):
        versions.rollback("acct")


def test_a_failed_init_leaves_no_workspace_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    store = StrategyVersions(tmp_path / "home" / "workspace")
    with pytest.raises(VersionError, match="need git on PATH"):
        store.init(bundle)
    assert list((tmp_path / "home").iterdir()) == []


def _first_rebalance_start(home: str, barrier: object) -> str:
    """One process's start_on_v1 on a shared home, released together with the others."""
    from oomrl.versions import start_on_v1

    ledger = Ledger(f"sqlite:///{home}/ledger.db")
    barrier.wait()  # type: ignore[attr-defined]
    return start_on_v1(StrategyVersions(Path(home) / "workspace", ledger), "acc", "daily_momentum")


def test_concurrent_first_rebalances_share_one_v1(tmp_path: Path) -> None:
    """Four processes start a fresh account at once: one workspace is created, all of them trade its v1."""
    import multiprocessing

    Ledger(f"sqlite:///{tmp_path}/ledger.db").create_schema()
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(4)
        with context.Pool(4) as pool:
            shas = pool.starmap(_first_rebalance_start, [(str(tmp_path), barrier)] * 4)
    workspace = StrategyVersions(tmp_path / "workspace")
    assert set(shas) == {workspace.resolve("v1")}
    assert [v.tag for v in workspace.list()] == ["v1"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ws-")] == []  # no staging left


def test_start_on_v1_keeps_an_active_version_and_needs_a_ledger(versions: StrategyVersions) -> None:
    from oomrl.versions import start_on_v1

    versions.init()
    sha = versions.activate("v1", "acc", "alpha")
    assert start_on_v1(versions, "acc", "alpha") == sha
    with pytest.raises(VersionError, match="needs a ledger"):
        start_on_v1(StrategyVersions(versions.workspace), "acc", "alpha")
