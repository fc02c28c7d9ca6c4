"""Strategy versions as commits and tags in the OOMRL_HOME workspace git repo.

The active one lives in the ledger.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import BaseModel

from oomrl.checkout import repo_root
from oomrl.errors import UnknownActiveVersionError, VersionError
from oomrl.files import private_dir
from oomrl.settings import child_environment

GUARD_PYPROJECT = """\
[project]
name = "oomrl-workspace"
version = "0"

# The gate's workspace contract (docs/gate.md): S is strategies/, T is tests/
[tool.oomrl.guard]
source = ["strategies"]
tests = ["tests"]
coverage_min = 95
"""
TAG_PREFIX = "v"
NOTES_REF = "refs/notes/oomrl"  # the metadata attached at promotion, a git note per version
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".coverage*")


class VersionLedger(Protocol):
    """The part of the ledger that records which version an account trades."""

    def active_version(self, account: str) -> str | None: ...

    def set_active_version(self, account: str, sha: str, name: str) -> None: ...

    def active_strategy(self, account: str) -> tuple[str, str] | None: ...


class VersionInfo(BaseModel):
    """One tagged version: its tag, commit, when, what it says, the strategy it is about."""

    tag: str
    sha: str
    date: str
    subject: str
    strategy: str | None = None
    active: bool = False


class StrategyVersions:
    """The workspace repo: init from the bundled strategies, commit with metadata, tag, activate,
    roll back."""

    author = ("oomrl", "oomrl@localhost")

    def __init__(
        self,
        workspace_dir: Path,
        ledger: VersionLedger | None = None,
        exports_dir: Path | None = None,
    ) -> None:
        self.workspace = Path(workspace_dir)
        self.ledger = ledger
        self.exports = exports_dir or self.workspace.parent / "versions"

    # -- git plumbing -------------------------------------------------------------------------
    def git(self, *args: str, cwd: Path | None = None, input_bytes: bytes | None = None) -> str:
        """Run git with a fixed identity and no user or system configuration."""
        env = child_environment(
            GIT_AUTHOR_NAME=self.author[0],
            GIT_AUTHOR_EMAIL=self.author[1],
            GIT_COMMITTER_NAME=self.author[0],
            GIT_COMMITTER_EMAIL=self.author[1],
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
        )
        try:
            done = subprocess.run(
                [
                    "git",
                    "-c",
                    "commit.gpgsign=false",
                    "-c",
                    "tag.gpgsign=false",
                    "-c",
                    "init.defaultBranch=main",
                    *args,
                ],
                cwd=cwd or self.workspace,
                env=env,
                input=input_bytes,
                capture_output=True,
                check=False,
            )
        except FileNotFoundError as exc:
            raise VersionError(
                f"cannot run git ({exc}); strategy versions need git on PATH"
            ) from exc
        if done.returncode != 0:
            raise VersionError(
                f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace').strip()}"
            )
        return done.stdout.decode(errors="replace").strip()

    @property
    def initialized(self) -> bool:
        return (self.workspace / ".git").is_dir()

    def _require_init(self) -> None:
        if not self.initialized:
            raise VersionError(
                f"no strategy workspace at {self.workspace}: run `oomrl versions init`"
            )

    def head(self) -> str:
        """The commit the workspace branch points at."""
        self._require_init()
        return self.git("rev-parse", "HEAD")

    def resolve(self, ref: str) -> str:
        """The full commit SHA of a tag, a SHA or a prefix of one."""
        self._require_init()
        try:
            return self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except VersionError:
            raise VersionError(f"unknown strategy version {ref!r}") from None

    # -- life cycle -----------------------------------------------------------------------------
    def init(self, source_root: Path | None = None) -> str:
        """Create the workspace from the bundled strategies and tag it v1.

        A no-op when it exists.
        """
        if self.initialized:
            return self.head()
        root = source_root or repo_root()
        for part in ("strategies", "tests/strategies"):
            if not (root / part).is_dir():
                raise VersionError(f"cannot initialise the workspace: {root / part} does not exist")
        staging = Path(tempfile.mkdtemp(prefix=".ws-", dir=self._parent()))
        try:
            shutil.copytree(root / "strategies", staging / "strategies", ignore=_IGNORED)
            shutil.copytree(
                root / "tests" / "strategies", staging / "tests" / "strategies", ignore=_IGNORED
            )
            (staging / "tests" / "__init__.py").touch()
            (staging / "pyproject.toml").write_text(GUARD_PYPROJECT)
            (staging / ".gitignore").write_text("__pycache__/\n*.pyc\n.pytest_cache/\n.coverage*\n")
            self.git("init", "-q", cwd=staging)
            self.git("add", "-A", cwd=staging)
            self.git(
                "commit", "-q", "-m", "Bundled strategies\n\nOomrl-Origin: bundled", cwd=staging
            )
            self.git("tag", f"{TAG_PREFIX}1", cwd=staging)
            staging.rename(self.workspace)  # appears whole or not at all
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if self.initialized:  # another process (a concurrent first rebalance) got there first
                return self.head()
            raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.head()

    def _parent(self) -> Path:
        private_dir(self.workspace.parent)
        return self.workspace.parent

    def clone_to(self, dest: Path, at: str | None = None) -> Path:
        """A scratch clone checked out at `at` (default: the branch head).

        A repair prepares its candidate there. A repair passes its account's active version
        (`base_for`), not the branch head.
        """
        self._require_init()
        self.git(
            "clone", "-q", "--no-hardlinks", str(self.workspace), str(dest), cwd=self._parent()
        )
        if at is not None:
            # Every version is tagged or an ancestor of a tag, so the clone holds it.
            self.git("checkout", "-q", "-B", "candidate", self.resolve(at), cwd=dest)
        return dest

    def base_for(self, account: str) -> str:
        """The commit a repair of `account` starts from: its active version, else v1.

        v1 is what its first rebalance would trade. Another account's promotion since then does not
        change it.
        """
        self._require_init()
        active = self.ledger.active_version(account) if self.ledger is not None else None
        if active is None:
            return self.resolve(f"{TAG_PREFIX}1")
        return self.known(active, account)

    def holds(self, ref: str, path: str) -> bool:
        """Whether version `ref` has a file at workspace-relative `path`."""
        try:
            self.git("cat-file", "-e", f"{ref}:{path}")
        except VersionError:
            return False
        return True

    def known(self, sha: str, account: str) -> str:
        """`sha` when the workspace holds that commit; else UnknownActiveVersionError naming the
        account."""
        try:
            self.git("cat-file", "-e", f"{sha}^{{commit}}")
        except VersionError:
            raise UnknownActiveVersionError(
                f"account {account!r} trades version {sha[:12]}, which the strategy workspace "
                f"{self.workspace} does not hold (was the workspace replaced?); activate a version "
                "it holds with `oomrl versions activate vN`"
            ) from None
        return sha

    def next_tag(self) -> str:
        numbers = [
            int(t[len(TAG_PREFIX) :])
            for t in self.git("tag", "-l", f"{TAG_PREFIX}*").split()
            if t[len(TAG_PREFIX) :].isdigit()
        ]
        return f"{TAG_PREFIX}{max(numbers, default=0) + 1}"

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether `older` is `newer` or one of its ancestors."""
        try:
            self.git("merge-base", "--is-ancestor", older, newer)
        except VersionError:
            return False
        return True

    def metadata(self, ref: str) -> dict[str, Any]:
        """The metadata attached at promotion (autopsy, diffs, verdicts, cross-validation,
        digest)."""
        sha = self.resolve(ref)
        try:
            return cast(
                dict[str, Any], json.loads(self.git("notes", f"--ref={NOTES_REF}", "show", sha))
            )
        except VersionError:
            return {}

    # -- reading ----------------------------------------------------------------------------------
    def info(self, tag: str, account: str | None = None) -> VersionInfo:
        """One version; `active` says whether `account` trades it."""
        sha = self.resolve(tag)
        date, subject = self.git("log", "-1", "--format=%cI%x00%s", sha).split("\x00", 1)
        active = self.ledger.active_version(account) if self.ledger and account else None
        return VersionInfo(
            tag=tag,
            sha=sha,
            date=date,
            subject=subject,
            strategy=self.metadata(sha).get("strategy"),
            active=active == sha,
        )

    def list(self, account: str | None = None) -> list[VersionInfo]:
        """Every tagged version, oldest first."""
        self._require_init()
        tags = self.git("tag", "-l", f"{TAG_PREFIX}*", "--sort=version:refname").split()
        return [self.info(tag, account) for tag in tags]

    def label(self, sha: str) -> str:
        """`v2 (1a2b3c4d5e6f)`, or the short SHA of an untagged commit, for messages."""
        tags = self.git("tag", "--points-at", sha, "-l", f"{TAG_PREFIX}*").split()
        return f"{tags[0]} ({sha[:12]})" if tags else sha[:12]

    def labels(self, names: dict[str, str] | None = None) -> dict[str, str]:
        """sha -> "v2 daily_momentum" for every tagged version (`names`: strategy by sha, e.g. from
        the ledger, where a version's notes name none). Reads only: no workspace means no labels."""
        if not self.initialized:
            return {}
        known = names or {}
        return {
            info.sha: " ".join(filter(None, (info.tag, info.strategy or known.get(info.sha))))
            for info in self.list()
        }

    def show(self, ref: str, account: str | None = None) -> dict[str, Any]:
        """A version's info, metadata and the files it changed against its parent."""
        sha = self.resolve(ref)
        tags = self.git("tag", "--points-at", sha).split()
        info = self.info(tags[0], account) if tags else None
        parents = self.git("log", "-1", "--format=%P", sha).split()
        stat = self.git("diff", "--stat", parents[0], sha) if parents else "(initial version)"
        return {
            "sha": sha,
            "info": info.model_dump() if info else None,
            "metadata": self.metadata(sha),
            "diffstat": stat,
            "message": self.git("log", "-1", "--format=%B", sha),
        }

    # -- activation --------------------------------------------------------------------------------
    def activate(self, ref: str, account: str, strategy: str | None = None) -> str:
        """Point the account at a version in the ledger.

        The rebalance then loads exactly that commit.
        """
        if self.ledger is None:
            raise VersionError("activating a version needs a ledger")
        sha = self.resolve(ref)
        name = strategy or self.metadata(sha).get("strategy")
        if not name:
            raise VersionError(f"version {ref} names no strategy; say which one to activate")
        self.ledger.set_active_version(account, sha, name)
        return sha

    def rollback(self, account: str, strategy: str | None = None) -> str:
        """Activate the nearest tagged ancestor of the account's active version.

        Versions may branch. The version tagged just before it may be another account's.
        """
        if self.ledger is None:
            raise VersionError("rolling back needs a ledger")
        self._require_init()
        active = self.ledger.active_version(account)
        if active is None:
            raise VersionError(f"account {account!r} has no active version to roll back from")
        self.known(active, account)
        tagged = {v.sha: v.tag for v in self.list()}
        ancestors = self.git("rev-list", "--first-parent", active).split()[1:]
        target = next((sha for sha in ancestors if sha in tagged), None)
        if target is None:
            raise VersionError(
                f"{account!r} runs {tagged.get(active, active[:12])}, which has no "
                "tagged ancestor; there is nothing to roll back to"
            )
        current = self.ledger.active_strategy(account)
        name = (
            strategy or self.metadata(active).get("strategy") or (current[1] if current else None)
        )
        return self.activate(tagged[target], account, name)

    def materialize(self, ref: str) -> Path:
        """The files of one commit, exported once to exports/<sha>/ (what rebalance and replay
        load)."""
        sha = self.resolve(ref)
        target = self.exports / sha
        if target.is_dir():
            return target
        private_dir(self.exports)
        staging = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=self.exports))
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha],
            cwd=self.workspace,
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            safe_extract(tar, staging)
        try:
            staging.rename(target)
        except OSError:  # another process exported it first
            shutil.rmtree(staging, ignore_errors=True)
        return target


def safe_extract(
    tar: tarfile.TarFile, target: Path, filters: bool = hasattr(tarfile, "data_filter")
) -> None:
    """Extract with tarfile's `data` filter.

    Some Pythons have no extraction filters: 3.11 before 3.11.4, such as Debian 12's python3.11.
    They get the refusals that matter here by hand. Those are absolute names, `..`, and anything
    but plain files and folders.
    """
    if filters:
        tar.extractall(target, filter="data")
        return
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise VersionError(
                f"refusing to extract {member.name!r}: only plain files and folders "
                "inside the export"
            )
    tar.extractall(target)  # every member was checked above


def start_on_v1(versions: StrategyVersions, account: str, strategy: str) -> str:
    """The account's active version.

    An account that has none starts on v1: the bundled strategies, created on first use. So every
    trade it books names a version.
    """
    if versions.ledger is None:
        raise VersionError("starting an account on v1 needs a ledger")
    active = versions.ledger.active_version(account)
    if active is not None:
        return active
    versions.init()
    return versions.activate(f"{TAG_PREFIX}1", account, strategy)
