"""Strategy versions in the workspace git repo: init, promote in one transaction, list, show,
activate, rollback."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomrl.errors import UnknownActiveVersionError, VersionError
from oomrl.portfolio.ledger import Ledger
from oomrl.repair import promotion
from oomrl.repair.versions import GUARD_PYPROJECT, StrategyVersions


class FlakyLedger(Ledger):
    """The real SQL ledger; `fail_next` makes the next version write fail (a crash
    mid-promotion)."""

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
        "from strategies.alpha import weight\n\ndef test_weight():\n    assert weight() == 1.0\n"
    )
    return root


@pytest.fixture()
def versions(tmp_path: Path) -> StrategyVersions:
    ledger = FlakyLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.create_schema()
    store = StrategyVersions(tmp_path / "home" / "workspace", ledger)
    store.init(make_bundle(tmp_path / "bundle"))
    return store


def candidate_with(
    versions: StrategyVersions,
    tmp_path: Path,
    body: str,
    at: str | None = None,
    name: str = "candidate",
) -> Path:
    clone = versions.clone_to(tmp_path / name, at=at)
    (clone / "strategies" / "alpha.py").write_text(body)
    return clone


def weight_of(versions: StrategyVersions, ref: str) -> str:
    return versions.git("show", f"{ref}:strategies/alpha.py").split("return ")[1].strip()


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
    versions: StrategyVersions, tmp_path: Path
) -> None:
    first = versions.head()
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.5\n")
    info = promotion.promote(
        versions, clone, "Repair alpha", {"autopsy": {"alert_id": "a1"}}, "acct", "alpha"
    )
    assert info.tag == "v2" and info.active and info.strategy == "alpha"
    assert versions.head() == info.sha != first
    assert "0.5" in (versions.workspace / "strategies" / "alpha.py").read_text()
    assert versions.metadata("v2")["autopsy"] == {"alert_id": "a1"}
    assert "Oomrl-Strategy: alpha" in versions.show("v2")["message"]
    assert "alpha.py" in versions.show("v2", "acct")["diffstat"]
    assert versions.show("v1")["metadata"] == {}
    assert [(v.tag, v.active) for v in versions.list("acct")] == [("v1", False), ("v2", True)]


def test_failed_activation_leaves_workspace_and_ledger_untouched(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    versions.activate("v1", "acct", "alpha")
    before = versions.head()
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.0\n")
    versions.ledger.fail_next = True  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match="ledger write failed"):
        promotion.promote(versions, clone, "Broken", {"x": 1}, "acct", "alpha")
    assert versions.head() == before
    assert "1.0" in (versions.workspace / "strategies" / "alpha.py").read_text()
    assert [v.tag for v in versions.list()] == ["v1"]
    assert versions.ledger.active_version("acct") == before  # type: ignore[union-attr]
    assert versions.git("status", "--porcelain") == ""


def test_rollback_activates_the_previous_version(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.25\n")
    promotion.promote(versions, clone, "Repair", {}, "acct", "alpha")
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


def test_materialize_exports_exactly_that_commit(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    clone = candidate_with(versions, tmp_path, "def weight() -> float:\n    return 0.75\n")
    promotion.promote(versions, clone, "Repair", {}, "acct", "alpha")
    old = versions.materialize("v1")
    assert "1.0" in (old / "strategies" / "alpha.py").read_text()
    assert "0.75" in (versions.materialize("v2") / "strategies" / "alpha.py").read_text()
    assert versions.materialize("v1") == old  # cached
    assert not (old / ".git").exists()


def test_nothing_to_commit_changes_nothing(versions: StrategyVersions, tmp_path: Path) -> None:
    clone = versions.clone_to(tmp_path / "same")
    with pytest.raises(VersionError, match="commit"):
        promotion.promote(versions, clone, "No change", {}, "acct", "alpha")
    assert [v.tag for v in versions.list()] == ["v1"]


def test_rollback_of_an_untagged_active_commit_goes_to_its_nearest_tagged_ancestor(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    clone = versions.clone_to(tmp_path / "two-commits")
    (clone / "tests" / "strategies" / "test_more.py").write_text(
        "def test_more():\n    assert 2 > 1\n"
    )
    versions.git("add", "-A", cwd=clone)
    versions.git("commit", "-q", "-m", "Tests first", cwd=clone)
    (clone / "strategies" / "alpha.py").write_text("def weight() -> float:\n    return 0.1\n")
    promotion.promote(versions, clone, "Repair", {}, "acct", "alpha")
    versions.activate("v2~1", "acct", "alpha")  # the tests-first commit carries no tag
    assert versions.rollback("acct") == versions.resolve("v1")
    assert versions.ledger.active_strategy("acct") == (versions.resolve("v1"), "alpha")  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_repair_of_an_account_on_an_older_version_branches_without_moving_the_other(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    """A promotes v2; B, still on v1, repairs from v1 and its v3 does not move A's version."""
    v1 = versions.activate("v1", "a", "alpha")
    versions.activate("v1", "b", "alpha")
    a_base = versions.base_for("a")
    v2 = promotion.promote(
        versions,
        candidate_with(
            versions, tmp_path, "def weight() -> float:\n    return 0.5\n", at=a_base, name="a"
        ),
        "A's repair",
        {},
        "a",
        "alpha",
    )
    b_base = versions.base_for("b")
    assert (a_base, b_base, versions.head()) == (v1, v1, v2.sha)  # B trades v1 still
    b_clone = candidate_with(
        versions, tmp_path, "def weight() -> float:\n    return 0.25\n", at=b_base, name="b"
    )
    assert versions.git("rev-parse", "HEAD", cwd=b_clone) == v1  # not the branch tip
    v3 = promotion.promote(versions, b_clone, "B's repair", {}, "b", "alpha")
    assert v3.tag == "v3" and versions.git("rev-parse", "v3^") == v1
    assert versions.head() == v2.sha  # the branch moves only on fast-forward
    assert "0.5" in (versions.workspace / "strategies" / "alpha.py").read_text()
    assert (weight_of(versions, "v2"), weight_of(versions, "v3")) == ("0.5", "0.25")
    assert versions.ledger.active_version("a") == v2.sha  # type: ignore[union-attr]
    assert versions.ledger.active_version("b") == v3.sha  # type: ignore[union-attr]
    assert [(v.tag, v.active) for v in versions.list("b")] == [
        ("v1", False),
        ("v2", False),
        ("v3", True),
    ]
    # B's next repair builds on its own v3; promoting it leaves the branch on A's v2.
    v4 = promotion.promote(
        versions,
        candidate_with(
            versions,
            tmp_path,
            "def weight() -> float:\n    return 0.2\n",
            at=versions.base_for("b"),
            name="b2",
        ),
        "B again",
        {},
        "b",
        "alpha",
    )
    assert versions.git("rev-parse", "v4^") == v3.sha and versions.head() == v2.sha
    # Rollback goes to the nearest tagged ancestor, never to another account's branch.
    assert versions.rollback("b") == v3.sha
    assert versions.rollback("b") == v1
    assert versions.rollback("a") == v1
    assert versions.materialize(v4.sha) != versions.materialize("v2")


def test_a_promotion_based_on_the_head_fast_forwards_and_a_failed_off_branch_one_restores(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    v1 = versions.activate("v1", "a", "alpha")
    promotion.promote(
        versions,
        candidate_with(
            versions, tmp_path, "def weight() -> float:\n    return 0.5\n", at=v1, name="a"
        ),
        "A",
        {},
        "a",
        "alpha",
    )
    head = versions.head()
    versions.ledger.fail_next = True  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match="ledger write failed"):
        promotion.promote(
            versions,
            candidate_with(
                versions, tmp_path, "def weight() -> float:\n    return 0.1\n", at=v1, name="b"
            ),
            "B",
            {},
            "b",
            "alpha",
        )
    assert versions.head() == head and [v.tag for v in versions.list()] == ["v1", "v2"]
    assert versions.ledger.active_version("b") is None  # type: ignore[union-attr]
    # V2's only
    assert len(versions.git("notes", "--ref=refs/notes/oomrl", "list").splitlines()) == 1


def test_an_active_version_the_workspace_does_not_hold_is_named(versions: StrategyVersions) -> None:
    versions.ledger.set_active_version("acct", "0123456789ab" * 3 + "0123", "alpha")  # type: ignore[union-attr]
    for operation in (versions.base_for, versions.rollback):
        with pytest.raises(
            UnknownActiveVersionError,
            match="account 'acct' trades version 0123456789ab, which the strategy workspace",
        ):
            operation("acct")
    assert versions.base_for("nobody") == versions.resolve("v1")  # no version yet: its first is v1
    versions.activate("v1", "acct", "alpha")
    with pytest.raises(
        VersionError, match="has no tagged ancestor; there is nothing to roll back to"
    ):
        versions.rollback("acct")


def _promote_from_v1(home: str, account: str, weight: str, barrier: object) -> str:
    """One process's repair of `account` from v1, promoted together with the others."""
    ledger = Ledger(f"sqlite:///{home}/ledger.db")
    store = StrategyVersions(Path(home) / "home" / "workspace", ledger)
    clone = store.clone_to(Path(home) / f"candidate-{account}", at=store.base_for(account))
    (clone / "strategies" / "alpha.py").write_text(f"def weight() -> float:\n    return {weight}\n")
    barrier.wait()  # type: ignore[attr-defined]
    return promotion.promote(store, clone, f"Repair of {account}", {}, account, "alpha").tag


@pytest.mark.slow
def test_concurrent_promotions_land_with_distinct_versions(
    versions: StrategyVersions, tmp_path: Path
) -> None:
    """Two processes promote at once from v1: both land, as v2 and v3, each active for its
    account."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(2)
        with context.Pool(2) as pool:
            tags = pool.starmap(
                _promote_from_v1,
                [(str(tmp_path), "a", "0.5", barrier), (str(tmp_path), "b", "0.25", barrier)],
            )
    assert sorted(tags) == ["v2", "v3"]
    by_account = dict(zip("ab", tags, strict=True))
    for account, weight in (("a", "0.5"), ("b", "0.25")):
        tag = by_account[account]
        assert weight_of(versions, tag) == weight
        assert versions.git("rev-parse", f"{tag}^") == versions.resolve("v1")
        assert versions.ledger.active_version(account) == versions.resolve(tag)  # type: ignore[union-attr]
    assert versions.head() in {versions.resolve("v2"), versions.resolve("v3")}
    assert versions.git("status", "--porcelain") == ""
    assert len(versions.git("notes", "--ref=refs/notes/oomrl", "list").splitlines()) == 2


def test_a_failed_init_leaves_no_workspace_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    store = StrategyVersions(tmp_path / "home" / "workspace")
    with pytest.raises(VersionError, match="need git on PATH"):
        store.init(bundle)
    assert list((tmp_path / "home").iterdir()) == []


def _first_rebalance_start(home: str, barrier: object) -> str:
    """One process's start_on_v1 on a shared home, released together with the others."""
    from oomrl.repair.versions import start_on_v1

    ledger = Ledger(f"sqlite:///{home}/ledger.db")
    barrier.wait()  # type: ignore[attr-defined]
    return start_on_v1(StrategyVersions(Path(home) / "workspace", ledger), "acc", "daily_momentum")


@pytest.mark.slow
def test_concurrent_first_rebalances_share_one_v1(tmp_path: Path) -> None:
    """Four processes start a fresh account at once: one workspace is created, all of them trade its
    v1."""
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
    assert [
        p.name for p in tmp_path.iterdir() if p.name.startswith(".ws-")
    ] == []  # no staging left


def test_start_on_v1_keeps_an_active_version_and_needs_a_ledger(versions: StrategyVersions) -> None:
    from oomrl.repair.versions import start_on_v1

    versions.init()
    sha = versions.activate("v1", "acc", "alpha")
    assert start_on_v1(versions, "acc", "alpha") == sha
    with pytest.raises(VersionError, match="needs a ledger"):
        start_on_v1(StrategyVersions(versions.workspace), "acc", "alpha")


@pytest.mark.parametrize("filters", [True, False])
def test_exports_refuse_members_outside_plain_files(tmp_path: Path, filters: bool) -> None:
    import io
    import tarfile

    from oomrl.repair.versions import safe_extract

    def archive(*members: tarfile.TarInfo) -> tarfile.TarFile:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            for member in members:
                tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
        raw.seek(0)
        return tarfile.open(fileobj=raw)

    good = tarfile.TarInfo("strategies/a.py")
    good.size = 1
    safe_extract(archive(good), tmp_path / "ok", filters=filters)
    assert (tmp_path / "ok" / "strategies" / "a.py").read_text() == "x"
    escape = tarfile.TarInfo("../escaped.py")
    escape.size = 1
    with pytest.raises((VersionError, tarfile.FilterError)):  # by hand, or tarfile's data filter
        safe_extract(archive(escape), tmp_path / "bad", filters=filters)
    assert not (tmp_path / "escaped.py").exists()
