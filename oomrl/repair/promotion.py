"""Promotion as a recoverable transaction: commit, tag, notes and active pointer land together.

If they do not, the next command that opens the workspace puts them back together.

Before the first git or ledger step a journal is written atomically. It is
`.git/oomrl-promotion.json`: tag, commit, the branch head before, account, strategy, notes, owner.
It is removed after the last step. The ledger write is the commit point. A journal may be found
with the account active on its commit. Then it is finished: branch fast-forwarded, tag and notes
made where missing. Any other is undone: branch back, tag and notes removed. The promote lock is
flock(2). The kernel releases it when its owner dies; it is never cleared by age. Holding it proves
no live promotion is half way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from oomrl.files import PRIVATE_FILE, atomic_write
from oomrl.owners import Owner
from oomrl.repair.versions import NOTES_REF

if TYPE_CHECKING:
    from oomrl.repair.versions import StrategyVersions, VersionInfo

# In the workspace's .git: one promotion at a time, across processes
PROMOTE_LOCK = "oomrl-promote.lock"
JOURNAL = "oomrl-promotion.json"
LOCK_WAIT_S = 300.0  # a promotion is a handful of git commands; a wait this long means a stuck one.
# Where git keeps the locks of the refs and the index a promotion writes.
# A git killed with its promotion leaves them. Every later git command on that ref would refuse.
GIT_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock", f"{NOTES_REF}.lock")
STEPS = ("commit", "journal", "fetch", "merge", "tag", "notes", "ledger", "done")
logger = logging.getLogger(__name__)


def reached(step: str) -> None:
    """A named point of a promotion (STEPS).

    Nothing happens here. The recovery tests end the process at each one. They prove that the next
    command puts the versions back together.
    """


@dataclass
class Journal:
    """What a promotion is about to do, and who does it."""

    tag: str
    sha: str
    old_head: str
    branch: str
    account: str
    strategy: str
    notes: dict[str, Any]
    owner: str
    # A probation's shadow book: its active version is the commit point (oomrl.repair.probation)
    shadow: str = ""
    opened_on: str = ""
    sessions: int = 0
    since: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def who(self) -> str:
        owner = Owner.parse(self.owner)
        return f"{owner.describe() if owner else self.owner} since {self.since}"


def journal_path(versions: StrategyVersions) -> Path:
    return versions.workspace / ".git" / JOURNAL


def read_journal(versions: StrategyVersions) -> Journal | None:
    """The pending journal, if any.

    A file that is not one is named; a journal is only ever written whole.
    """
    from oomrl.errors import VersionError

    path = journal_path(versions)
    try:
        return Journal(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise VersionError(
            f"{path} is not a promotion journal oomrl wrote ({exc}); move it away and "
            "run `oomrl versions check`"
        ) from None


@contextmanager
def promote_lock(versions: StrategyVersions, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the promote lock, naming a live holder.

    It is flock: a dead holder's lock is free at once.
    """
    from oomrl.errors import VersionError

    # An existence lock would outlive a killed holder
    lock = FileLock(
        versions.workspace / ".git" / PROMOTE_LOCK,
        mode=PRIVATE_FILE,
        thread_local=False,
        fallback_to_soft=False,
    )
    try:
        lock.acquire(timeout=wait_s)
    except Timeout:
        pending = read_journal(versions)
        holder = pending.who() if pending else "another process"
        raise VersionError(
            f"the strategy workspace {versions.workspace} is being promoted to by "
            f"{holder}; still busy after {wait_s:.0f} s"
        ) from None
    try:
        yield
    finally:
        lock.release()


def promote(
    versions: StrategyVersions,
    candidate: Path,
    message: str,
    metadata: dict[str, Any],
    account: str,
    strategy: str,
    probation: tuple[date, int] | None = None,
) -> VersionInfo:
    """Commit, fetch, fast-forward, tag, note and activate the candidate for `account`.

    The branch is fast-forwarded when the candidate is based on the head. `probation` is (last
    session seen, forward sessions). With it, the candidate opens its probation on a shadow book
    instead of taking the capital. Every step is journalled, so a kill at any step is recovered.

    Promotions are serialised by a file lock, so concurrent ones get distinct tags. A candidate
    based on the branch head fast-forwards it. One based on an older version becomes a tagged
    commit off the branch. The branch stays where it was. (Its account had not taken a later
    promotion of another account.) The ledger write comes last. A failed step restores branch, tag
    and notes. The next command that opens the workspace finishes or undoes a killed promotion
    (`open_workspace`, `recover`).
    """
    versions.head()  # the workspace must exist
    versions.git("add", "-A", cwd=candidate)
    trailers = f"\n\nOomrl-Strategy: {strategy}\nOomrl-Account: {account}"
    versions.git("commit", "-q", "-m", message + trailers, cwd=candidate)
    sha = versions.git("rev-parse", "HEAD", cwd=candidate)
    reached("commit")
    with promote_lock(versions):
        recover_locked(versions)  # a dead promotion's leftovers go first, so tags stay in sequence
        tag = versions.next_tag()
        journal = Journal(
            tag=tag,
            sha=sha,
            old_head=versions.head(),
            branch=branch_of(versions),
            account=account,
            strategy=strategy,
            notes={**metadata, "strategy": strategy, "tag": tag},
            owner=str(Owner.me()),
        )
        if probation is not None:
            from oomrl.repair.probation import shadow_name

            journal.shadow, journal.opened_on, journal.sessions = (
                shadow_name(account, tag),
                str(probation[0]),
                probation[1],
            )
        payload = json.dumps(asdict(journal), sort_keys=True, default=str)
        atomic_write(
            journal_path(versions),
            lambda temp: Path(temp).write_text(payload, encoding="utf-8"),
            durable=True,
        )
        reached("journal")
        try:
            versions.git("fetch", "-q", str(candidate), "HEAD")
            reached("fetch")
            if versions.is_ancestor(journal.old_head, sha):
                versions.git("merge", "-q", "--ff-only", sha)
                reached("merge")
            versions.git("tag", journal.tag, sha)  # the tag keeps an off-branch version reachable
            reached("tag")
            write_notes(versions, sha, journal.notes)
            reached("notes")
            commit_point(versions, journal)
            reached("ledger")
        except BaseException:
            abandon(versions, journal)
            raise
        journal_path(versions).unlink()
        reached("done")
    return versions.info(journal.tag, account)


def commit_point(versions: StrategyVersions, journal: Journal) -> None:
    """The ledger write that makes the promotion real: the account's active version, or the
    probation."""
    if not journal.shadow:
        versions.activate(journal.tag, journal.account, journal.strategy)
        return
    from oomrl.repair.probation import open_probation

    open_probation(
        versions.ledger,  # type: ignore[arg-type]
        journal.account,
        journal.tag,
        journal.sha,
        journal.strategy,
        date.fromisoformat(journal.opened_on),
        journal.sessions,
    )


def committed_to(journal: Journal) -> str:
    """The ledger account whose active version says whether the promotion landed."""
    return journal.shadow or journal.account


def branch_of(versions: StrategyVersions) -> str:
    return versions.git("symbolic-ref", "--short", "HEAD")


def write_notes(versions: StrategyVersions, sha: str, notes: dict[str, Any]) -> None:
    blob = json.dumps(notes, sort_keys=True, default=str, indent=1).encode()
    versions.git("notes", f"--ref={NOTES_REF}", "add", "-f", "-F", "-", sha, input_bytes=blob)


def open_workspace(versions: StrategyVersions, source_root: Path | None = None) -> str:
    """Create the workspace (tag v1), or finish or undo a promotion whose process died.

    Every command that writes versions opens the workspace here. Returns the head's SHA.
    """
    recover(versions)
    return versions.init(source_root)


def check(versions: StrategyVersions) -> list[str]:
    """After recovering: what keeps branch, tags, notes and the ledger's actives from agreeing.

    Empty when they agree.
    """
    versions.head()  # the workspace must exist
    recover(versions)
    actives: dict[str, str] = getattr(versions.ledger, "active_versions", dict)()
    return problems(versions, actives)


def recover(versions: StrategyVersions) -> str | None:
    """Finish or undo a promotion whose process died; what was done.

    None when nothing was pending. Needs the ledger, which decides which way. Waits for a live
    promotion to end.
    """
    if versions.ledger is None or not versions.initialized or not journal_path(versions).exists():
        return None
    with promote_lock(versions):
        return recover_locked(versions)


def recover_locked(versions: StrategyVersions) -> str | None:
    """`recover` for a caller that holds the promote lock."""
    journal = read_journal(versions)
    if journal is None:
        return None
    done = settle(versions, journal)
    note = (
        f"recovered: the promotion of {journal.tag} ({journal.sha[:12]}) to account "
        f"{journal.account} "
        f"by {journal.who()} did not finish; {done}"
    )
    logger.warning(note)
    return note


def settle(versions: StrategyVersions, journal: Journal) -> str:
    """Bring branch, tag and notes in line with the ledger (the commit point); drop the journal."""
    active = (
        versions.ledger.active_version(committed_to(journal))
        if versions.ledger is not None
        else None
    )
    done = align(versions, journal, active)
    journal_path(versions).unlink(missing_ok=True)
    return done


def abandon(versions: StrategyVersions, journal: Journal) -> None:
    """A step raised: undo branch, tag and notes at once.

    The ledger may not be readable to say whether its write landed. Then the journal stays for the
    next command to decide.
    """
    try:
        active = (
            versions.ledger.active_version(committed_to(journal))
            if versions.ledger is not None
            else None
        )
    except Exception:  # noqa: BLE001 - the step's own error is what the caller sees
        logger.warning(
            "promotion of %s failed and the ledger cannot be read; the next command that "
            "opens %s settles it",
            journal.tag,
            versions.workspace,
        )
        align(versions, journal, None)
        return
    align(versions, journal, active)
    journal_path(versions).unlink(missing_ok=True)


def align(versions: StrategyVersions, journal: Journal, active: str | None) -> str:
    """Finish the promotion when the ledger trades its commit (`active`), else undo it."""
    git_dir = versions.workspace / ".git"
    for name in (*GIT_LOCKS, f"refs/heads/{journal.branch}.lock", f"refs/tags/{journal.tag}.lock"):
        (git_dir / name).unlink(missing_ok=True)  # we hold the promote lock: their git is dead
    for temp in git_dir.glob(f".{JOURNAL}.*.tmp"):
        temp.unlink(missing_ok=True)
    held = has_commit(versions, journal.sha)
    if held and active == journal.sha:
        return finish(versions, journal)
    return undo(versions, journal, held)


def finish(versions: StrategyVersions, journal: Journal) -> str:
    """The ledger already trades the commit: make the branch, tag and notes say so too."""
    made = []
    head = versions.head()
    if head == journal.old_head and versions.is_ancestor(journal.old_head, journal.sha):
        versions.git("merge", "-q", "--ff-only", journal.sha)
        made.append("branch fast-forwarded")
    # An index or work tree a killed git left half way
    versions.git("reset", "-q", "--hard", "HEAD")
    if not tag_points_at(versions, journal.tag, journal.sha):
        versions.git("tag", "-f", journal.tag, journal.sha)
        made.append(f"tag {journal.tag} made")
    if not has_notes(versions, journal.sha):
        write_notes(versions, journal.sha, journal.notes)
        made.append("notes attached")
    return "finished it: the ledger had activated it" + (f" ({', '.join(made)})" if made else "")


def undo(versions: StrategyVersions, journal: Journal, held: bool) -> str:
    """The ledger never activated the commit: branch, tag and notes go back to before."""
    undone = []
    if versions.head() != journal.old_head:
        undone.append("branch moved back")
    versions.git("reset", "-q", "--hard", journal.old_head)
    if tag_points_at(versions, journal.tag, journal.sha):
        versions.git("tag", "-d", journal.tag)
        undone.append(f"tag {journal.tag} removed")
    if held and has_notes(versions, journal.sha):
        versions.git("notes", f"--ref={NOTES_REF}", "remove", journal.sha)
        undone.append("notes removed")
    return "rolled it back: the ledger never activated it" + (
        f" ({', '.join(undone)})" if undone else ""
    )


def has_commit(versions: StrategyVersions, sha: str) -> bool:
    """Whether the workspace holds the commit (the fetch may not have happened)."""
    from oomrl.errors import VersionError

    try:
        versions.git("cat-file", "-e", f"{sha}^{{commit}}")
    except VersionError:
        return False
    return True


def tag_points_at(versions: StrategyVersions, tag: str, sha: str) -> bool:
    return tag in versions.git("tag", "-l", "--points-at", sha, tag).split()


def has_notes(versions: StrategyVersions, sha: str) -> bool:
    return any(
        line.split()[-1] == sha
        for line in versions.git("notes", f"--ref={NOTES_REF}", "list").splitlines()
    )


def problems(versions: StrategyVersions, actives: dict[str, str]) -> list[str]:
    """What keeps branch, tags, notes and the ledger's active pointers from agreeing.

    `actives` maps account -> sha. Empty when they agree.
    """
    found = []
    if read_journal(versions) is not None:
        found.append(f"a promotion is in progress or unrecovered ({journal_path(versions)})")
    tags = {tag: versions.resolve(tag) for tag in versions.git("tag", "-l", "v*").split()}
    tagged = set(tags.values())
    head = versions.head()
    if head not in tagged:
        found.append(
            f"branch {branch_of(versions)} is on {head[:12]}, which is no version (no tag)"
        )
    noted = {
        line.split()[-1]
        for line in versions.git("notes", f"--ref={NOTES_REF}", "list").splitlines()
    }
    found += [
        f"version {tag} ({sha[:12]}) has no notes"
        for tag, sha in sorted(tags.items())
        if tag != "v1" and sha not in noted
    ]
    found += [f"notes on {sha[:12]}, which no tag names" for sha in sorted(noted - tagged)]
    for account, sha in sorted(actives.items()):
        if sha not in tagged:
            found.append(f"account {account} trades {sha[:12]}, which is no tagged version")
    if versions.git("status", "--porcelain"):
        found.append(f"the work tree of {versions.workspace} has changes git does not hold")
    return found
