"""One repair per account at a time, held in the ledger database, and the repair heartbeat.

The lock lives in the ledger, not in Prefect. Prefect revokes a deployment's concurrency lease
while a run is paused. The heartbeat tells a live repair from one whose process died.

Every repair run registers a row when it starts: `flow_run_id`, `account`, `claimed_at`, `beat_at`.
A thread beats it every CLAIM_BEAT_S seconds for as long as its process lives. It beats also while
the run waits for approval, because `pause_flow_run` blocks inside the run's process.

The account lock is the nullable unique column `holds`. A run sets it to its account only around
the gate and the promotion (after approval). So a paused repair holds nothing. A second alert can
reach its own approval. Two kinds of holder are presumed dead, and their row is taken over.
- One whose process is gone. Its `owner` (host:pid:start time) is checked on the same host.
- One silent for CLAIM_SILENT_S seconds (another host).
A dead non-holder's row is taken over too, when it is needed. The webhook reads the same rows. It
tells a live run from one that went silent: worker SIGKILLed, Prefect still says RUNNING. Each
transition is one statement guarded by a primary key or unique constraint. So concurrent runs on
any host agree (SQLite and PostgreSQL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Self

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError

from oomrl.errors import AccountBusyError, TooManyRepairsError
from oomrl.names import ACCOUNT_MAX
from oomrl.owners import Owner, dead
from oomrl.portfolio.ledger_tables import create_tables, driver_url

CLAIM_BEAT_S = 15.0
CLAIM_SILENT_S = 120.0  # eight missed beats: a process this quiet is gone (or its host is)
CLAIM_WAIT_S = 6 * 3600.0  # how long an approved repair waits for another repair of its account
OWNER_MAX = 255
logger = logging.getLogger(__name__)


def _now() -> datetime:
    # Naive UTC: compares alike on SQLite and PostgreSQL
    return datetime.now(UTC).replace(tzinfo=None)


def claims_table(metadata: sa.MetaData) -> sa.Table:
    """The `repair_claims` table in `metadata` (its schema, if any)."""
    return sa.Table(
        "repair_claims",
        metadata,
        sa.Column("flow_run_id", sa.String(64), primary_key=True),
        sa.Column("account", sa.String(ACCOUNT_MAX), nullable=False),
        # The account while this run holds its lock, else NULL.
        # NULLs never collide in a unique column.
        sa.Column("holds", sa.String(ACCOUNT_MAX), nullable=True, unique=True),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.Column("beat_at", sa.DateTime(), nullable=False),
        # host:pid:start time of the process that registered it (oomrl.owners); NULL in older rows.
        sa.Column("owner", sa.String(OWNER_MAX), nullable=True),
    )


@dataclass(frozen=True)
class Claim:
    """A repair run's row: whose it is, whether it holds its account, when it last beat."""

    flow_run_id: str
    account: str
    holds: bool
    claimed_at: datetime
    beat_at: datetime
    owner: str | None = None

    def silent(self, silent_s: float = CLAIM_SILENT_S, now: datetime | None = None) -> bool:
        """No beat for `silent_s` seconds: the process that owned it is presumed dead."""
        return self.beat_at < (now or _now()) - timedelta(seconds=silent_s)

    def gone(self, silent_s: float = CLAIM_SILENT_S) -> bool:
        """Its process died (seen on this host), or it has not beaten for `silent_s` seconds."""
        return dead(self.owner) or self.silent(silent_s)

    def describe(self) -> str:
        """`run X (pid 123 on host h, last beat 09:00:00 UTC)`, for messages."""
        owner = Owner.parse(self.owner)
        who = f"{owner.describe()}, " if owner else ""
        return f"run {self.flow_run_id} ({who}last beat {self.beat_at:%H:%M:%S} UTC)"


class ClaimBook:
    """The claims of one ledger database (any SQLAlchemy URL; `schema` for a PostgreSQL schema)."""

    def __init__(self, url: str, schema: str | None = None) -> None:
        from oomrl.files import private_file, sqlite_file

        url = driver_url(url)
        if (database := sqlite_file(url)) is not None:
            private_file(database, tighten=True)
        self.engine = sa.create_engine(url, future=True)
        self.table = claims_table(sa.MetaData(schema=schema))

    def create(self) -> Self:
        """Create the table if it is missing, and add `owner` to a table an older version created.

        Two first users may race: the loser finds it made.
        """
        create_tables(self.engine, self.table.metadata, [self.table])
        columns = {
            c["name"]
            for c in sa.inspect(self.engine).get_columns(self.table.name, schema=self.table.schema)
        }
        if "owner" not in columns:
            name = self.engine.dialect.identifier_preparer.format_table(self.table)
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        sa.text(f"ALTER TABLE {name} ADD COLUMN owner VARCHAR({OWNER_MAX})")
                    )
            except DBAPIError:  # another process added it first
                pass
        return self

    def register(self, flow_run_id: str, account: str, owner: Owner | None = None) -> None:
        """This run is alive; a retried run with the same id refreshes its row.

        `owner` is the process that beats it (default: this one).
        """
        now, who = _now(), str(owner or Owner.me())[:OWNER_MAX]
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    self.table.insert().values(
                        flow_run_id=flow_run_id,
                        account=account,
                        holds=None,
                        claimed_at=now,
                        beat_at=now,
                        owner=who,
                    )
                )
        except IntegrityError:
            with self.engine.begin() as conn:
                conn.execute(
                    self.table.update()
                    .where(self.table.c.flow_run_id == flow_run_id)
                    .values(account=account, beat_at=now, owner=who)
                )

    def live(self, silent_s: float = CLAIM_SILENT_S) -> list[Claim]:
        """Every registered run whose process is not known to be gone.

        Those are the repairs running now, paused or not, on any path (CLI, flow, demo).
        """
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(self.table)).all()
        return [claim for claim in map(self._claim, rows) if not claim.gone(silent_s)]

    def beat(self, flow_run_id: str) -> bool:
        """Refresh the run's heartbeat; False when its row is gone (taken over as silent)."""
        with self.engine.begin() as conn:
            done = conn.execute(
                self.table.update()
                .where(self.table.c.flow_run_id == flow_run_id)
                .values(beat_at=_now())
            )
        return done.rowcount == 1

    def get(self, flow_run_id: str) -> Claim | None:
        """The run's row, if it has one."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(self.table).where(self.table.c.flow_run_id == flow_run_id)
            ).first()
        return None if row is None else self._claim(row)

    def holder(self, account: str) -> Claim | None:
        """The run that holds `account` now, if any."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(self.table).where(self.table.c.holds == account)).first()
        return None if row is None else self._claim(row)

    def acquire(
        self, flow_run_id: str, account: str, silent_s: float = CLAIM_SILENT_S
    ) -> Claim | None:
        """Hold `account` for this (registered) run: None when held now, else the live holder.

        A holder silent for `silent_s` seconds loses its row, in one conditional delete. Of two runs
        taking over, one deletes. Both then race on the unique column, and one wins.
        """
        for _ in range(3):
            try:
                with self.engine.begin() as conn:
                    done = conn.execute(
                        self.table.update()
                        .where(self.table.c.flow_run_id == flow_run_id)
                        .values(holds=account, beat_at=_now())
                    )
                if done.rowcount != 1:
                    raise LookupError(
                        f"repair run {flow_run_id} has no claim row (register it first)"
                    )
                return None
            except IntegrityError:
                pass
            current = self.holder(account)
            if current is None:
                continue  # released between our update and our read
            if current.flow_run_id == flow_run_id:
                return None
            if not current.gone(silent_s):
                return current
            logger.warning(
                "repair %s held %s but its process is gone: taking over",
                current.describe(),
                account,
            )
            with self.engine.begin() as conn:
                conn.execute(
                    self.table.delete().where(
                        self.table.c.flow_run_id == current.flow_run_id,
                        self.table.c.beat_at == current.beat_at,
                    )
                )
        return self.holder(account)

    def release(self, flow_run_id: str) -> None:
        """The run ended: drop its row (and with it any lock it held)."""
        with self.engine.begin() as conn:
            conn.execute(self.table.delete().where(self.table.c.flow_run_id == flow_run_id))

    def _claim(self, row: sa.Row) -> Claim:
        return Claim(
            flow_run_id=row.flow_run_id,
            account=row.account,
            holds=row.holds is not None,
            claimed_at=row.claimed_at,
            beat_at=row.beat_at,
            owner=row.owner,
        )


def wait_to_hold(
    book: ClaimBook,
    flow_run_id: str,
    account: str,
    wait_s: float = CLAIM_WAIT_S,
    poll_s: float = CLAIM_BEAT_S,
    say: Callable[[str], None] = logger.info,
) -> None:
    """Hold `account` for this run, waiting (and saying so) while another live repair holds it."""
    deadline = time.monotonic() + wait_s
    while (holder := book.acquire(flow_run_id, account)) is not None:
        if time.monotonic() >= deadline:
            waited = f"after {wait_s:.0f} s of waiting" if wait_s > 0 else "not waiting (wait is 0)"
            raise AccountBusyError(
                f"account {account} is being repaired by {holder.describe()}; {waited}"
            )
        say(
            f"account {account} is being repaired by {holder.describe()}; waiting up to "
            f"{max(0.0, deadline - time.monotonic()):.0f} s"
        )
        time.sleep(min(poll_s, max(0.05, deadline - time.monotonic())))


def check_room(book: ClaimBook, flow_run_id: str, limit: int | None) -> None:
    """TooManyRepairsError when `limit` other repairs are running already (this run registered)."""
    if limit is None:
        return
    others = [claim for claim in book.live() if claim.flow_run_id != flow_run_id]
    if len(others) >= limit:
        raise TooManyRepairsError(
            f"{len(others)} repairs are running already, the most "
            f"OOMRL_REPAIR_MAX_RUNNING={limit} allows (runs "
            f"{', '.join(sorted(c.flow_run_id for c in others)[:5])}); start it again "
            "when one has ended (re-deliver its alert)"
        )


class RepairClaim:
    """A repair's row for as long as the block runs: registered, beating, released at the end.

    `hold()` takes the account for the gate and the promotion, waiting up to `wait_s`. `limit` is
    the flow's OOMRL_REPAIR_MAX_RUNNING. It refuses to start beyond that many live repairs. A run
    counts once registered. So two starting at once may both refuse, but never both exceed it.
    """

    def __init__(
        self,
        book: ClaimBook,
        run_id: str,
        account: str,
        wait_s: float = CLAIM_WAIT_S,
        say: Callable[[str], None] = logger.info,
        limit: int | None = None,
    ) -> None:
        self.book, self.run_id, self.account = book, run_id, account
        self.wait_s, self.say, self.limit = wait_s, say, limit
        self._beat = Heartbeat(book, run_id)

    def __enter__(self) -> Self:
        self.book.register(self.run_id, self.account)
        try:
            check_room(self.book, self.run_id, self.limit)
        except BaseException:
            self.book.release(self.run_id)
            raise
        self._beat.__enter__()
        return self

    def hold(self) -> None:
        """Take the account; AccountBusyError when another live repair kept it for `wait_s`."""
        wait_to_hold(self.book, self.run_id, self.account, self.wait_s, say=self.say)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            self._beat.__exit__(kind, error, trace)
        finally:
            self.book.release(self.run_id)


class Heartbeat:
    """Beats a run's claim from a daemon thread every `interval_s` until the block ends."""

    def __init__(self, book: ClaimBook, flow_run_id: str, interval_s: float = CLAIM_BEAT_S) -> None:
        self.book, self.flow_run_id, self.interval_s = book, flow_run_id, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"claim-beat-{flow_run_id}", daemon=True
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not self.book.beat(self.flow_run_id):
                    logger.warning(
                        "repair run %s lost its claim row (taken over as silent)", self.flow_run_id
                    )
            except Exception as exc:  # noqa: BLE001 - a database blip: the next beat tries again
                logger.warning("claim heartbeat of %s failed: %s", self.flow_run_id, exc)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + 5)
