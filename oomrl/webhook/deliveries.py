"""Durable record of alert ids already accepted: a replay or a restart never repairs twice.

A row is first a claim (no run yet) while its delivery starts the repair. Then it records what was
started. A claim whose launch fails is dropped, so the sender's retry starts it again. A claim left
by a process that died mid-launch may be taken over once it is stale. A run that crashed, failed or
was cancelled may be reopened by the next delivery. Every transition is one conditional statement.
So concurrent deliveries (in one process or several) agree on who launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from oomrl.files import private_file, sqlite_file
from oomrl.names import ACCOUNT_MAX, ALERT_ID_MAX
from oomrl.portfolio.ledger_tables import create_tables, driver_url

_METADATA = sa.MetaData()
DELIVERIES = sa.Table(
    "webhook_deliveries",
    _METADATA,
    sa.Column("alert_id", sa.String(ALERT_ID_MAX), primary_key=True),
    sa.Column("account", sa.String(ACCOUNT_MAX), nullable=True),
    sa.Column("source", sa.String(40), nullable=False),
    sa.Column("flow_run_id", sa.String(64), nullable=True),
    sa.Column("event_id", sa.String(64), nullable=True),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
)


def _now() -> datetime:
    # Naive UTC: compares alike on SQLite and PostgreSQL
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Delivery:
    """One accepted alert and what it started (nothing yet while its launch is pending)."""

    alert_id: str
    flow_run_id: str | None
    event_id: str | None
    received_at: datetime | None = None

    @property
    def pending(self) -> bool:
        """Claimed, but the run is not started (or not recorded) yet."""
        return self.flow_run_id is None and self.event_id is None


class DeliveryStore:
    """Claims alert ids atomically (primary key) in any SQLAlchemy database."""

    def __init__(self, url: str) -> None:
        database = sqlite_file(url)
        # Often the ledger itself: private before SQLite creates it (0600, folder 0700)
        if database is not None:
            private_file(database, tighten=True)
        self._engine = sa.create_engine(driver_url(url), future=True)
        create_tables(self._engine, _METADATA, [DELIVERIES])

    def claim(self, alert_id: str, account: str | None, source: str) -> Delivery | None:
        """Reserve `alert_id`: None when this caller now owns it, else the row already there."""
        row = {"alert_id": alert_id, "account": account, "source": source, "received_at": _now()}
        try:
            with self._engine.begin() as conn:
                conn.execute(DELIVERIES.insert().values(**row))
            return None
        except IntegrityError:
            existing = self.get(alert_id)
            if existing is None:  # released between our insert and read: the caller may claim again
                return Delivery(alert_id, None, None, None)
            return existing

    def get(self, alert_id: str) -> Delivery | None:
        """The delivery recorded for `alert_id`, if any."""
        with self._engine.connect() as conn:
            row = conn.execute(
                sa.select(
                    DELIVERIES.c.flow_run_id, DELIVERIES.c.event_id, DELIVERIES.c.received_at
                ).where(DELIVERIES.c.alert_id == alert_id)
            ).first()
        return (
            None
            if row is None
            else Delivery(alert_id, row.flow_run_id, row.event_id, row.received_at)
        )

    def record(self, alert_id: str, flow_run_id: str | None, event_id: str | None) -> None:
        """Attach what the alert started to its claim."""
        with self._engine.begin() as conn:
            conn.execute(
                DELIVERIES.update()
                .where(DELIVERIES.c.alert_id == alert_id)
                .values(flow_run_id=flow_run_id, event_id=event_id)
            )

    def release(self, alert_id: str) -> None:
        """Drop a claim whose run could not be started.

        So the sender's retry is not a 'duplicate'.
        """
        with self._engine.begin() as conn:
            conn.execute(
                DELIVERIES.delete().where(
                    DELIVERIES.c.alert_id == alert_id,
                    DELIVERIES.c.flow_run_id.is_(None),
                    DELIVERIES.c.event_id.is_(None),
                )
            )

    def take_over(self, alert_id: str, older_than: timedelta) -> bool:
        """Own a pending claim older than `older_than` (its process died mid-launch); True when
        won."""
        return self._update_if(
            alert_id,
            DELIVERIES.c.flow_run_id.is_(None),
            DELIVERIES.c.event_id.is_(None),
            DELIVERIES.c.received_at < _now() - older_than,
        )

    def reopen(self, alert_id: str, flow_run_id: str) -> bool:
        """Turn a delivery whose run ended without success back into a claim.

        True for the one winner.
        """
        return self._update_if(
            alert_id, DELIVERIES.c.flow_run_id == flow_run_id, flow_run_id=None, event_id=None
        )

    def recent(self, account: str, seconds: float) -> int:
        """Deliveries of `account` claimed, started or restarted in the last `seconds`."""
        with self._engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(DELIVERIES)
                    .where(
                        DELIVERIES.c.account == account,
                        DELIVERIES.c.received_at >= _now() - timedelta(seconds=seconds),
                    )
                ).scalar_one()
            )

    def _update_if(
        self, alert_id: str, *conditions: sa.ColumnElement[bool], **values: object
    ) -> bool:
        with self._engine.begin() as conn:
            done = conn.execute(
                DELIVERIES.update()
                .where(DELIVERIES.c.alert_id == alert_id, *conditions)
                .values(received_at=_now(), **values)
            )
        return done.rowcount == 1
