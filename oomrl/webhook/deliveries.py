"""Durable record of alert ids already accepted, so a replay or a restart never starts a second repair."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

_METADATA = sa.MetaData()
DELIVERIES = sa.Table(
    "webhook_deliveries",
    _METADATA,
    sa.Column("alert_id", sa.String(200), primary_key=True),
    sa.Column("account", sa.String(200), nullable=True),
    sa.Column("source", sa.String(40), nullable=False),
    sa.Column("flow_run_id", sa.String(64), nullable=True),
    sa.Column("event_id", sa.String(64), nullable=True),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class Delivery:
    """One accepted alert and what it started."""

    alert_id: str
    flow_run_id: str | None
    event_id: str | None


class DeliveryStore:
    """Claims alert ids atomically (primary key) in any SQLAlchemy database."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self._engine = sa.create_engine(url, future=True)
        _METADATA.create_all(self._engine, tables=[DELIVERIES])

    def claim(self, alert_id: str, account: str | None, source: str) -> Delivery | None:
        """Reserve `alert_id`; return None when it is new, else the earlier delivery."""
        row = {"alert_id": alert_id, "account": account, "source": source,
               "received_at": datetime.now(UTC)}
        try:
            with self._engine.begin() as conn:
                conn.execute(DELIVERIES.insert().values(**row))
            return None
        except IntegrityError:
            existing = self.get(alert_id)
            if existing is None:  # released between our insert and read: the caller may retry
                return Delivery(alert_id, None, None)
            return existing

    def get(self, alert_id: str) -> Delivery | None:
        """The delivery recorded for `alert_id`, if any."""
        with self._engine.connect() as conn:
            row = conn.execute(
                sa.select(DELIVERIES.c.flow_run_id, DELIVERIES.c.event_id)
                .where(DELIVERIES.c.alert_id == alert_id)
            ).first()
        return None if row is None else Delivery(alert_id, row.flow_run_id, row.event_id)

    def record(self, alert_id: str, flow_run_id: str | None, event_id: str | None) -> None:
        """Attach what the alert started to its claim."""
        with self._engine.begin() as conn:
            conn.execute(DELIVERIES.update().where(DELIVERIES.c.alert_id == alert_id)
                         .values(flow_run_id=flow_run_id, event_id=event_id))

    def release(self, alert_id: str) -> None:
        """Drop a claim whose run could not be started, so the sender's retry is not a 'duplicate'."""
        with self._engine.begin() as conn:
            conn.execute(DELIVERIES.delete().where(DELIVERIES.c.alert_id == alert_id))
