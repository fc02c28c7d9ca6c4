"""Table definitions of the ledger (SQLAlchemy Core); `driver_url` re-exported from the settings."""

from __future__ import annotations

import sqlalchemy as sa

from oomrl.settings.urls import driver_url

__all__ = [
    "CREATE_RETRIES",
    "FILL_COLUMNS",
    "NAV_FIELDS",
    "SCHEMA_LOCK_KEY",
    "create_tables",
    "driver_url",
    "ledger_tables",
]

FILL_COLUMNS = [
    "date",
    "symbol",
    "side",
    "quantity",
    "price",
    "frictionless_price",
    "commission",
    "stamp_duty",
    "transfer_fee",
    "impact_cost",
    "adv_participation",
]
NAV_FIELDS = [
    "nav",
    "cash",
    "market_value",
    "frictionless_return",
    "realized_return",
    "slippage_leakage",
    "turnover",
    "costs",
    "principal_loss",
]
# A NAV frame's columns in order, as the ledger reads them and a replay writes them.
NAV_COLUMNS = [
    "date",
    "nav",
    "cash",
    "market_value",
    "frictionless_return",
    "realized_return",
    "slippage_leakage",
    "turnover",
    "costs",
    "reward",
    "principal_loss",
    "strategy_version",
]


# The key of the PostgreSQL advisory lock that serialises table creation: b"oomrl" as an integer.
SCHEMA_LOCK_KEY = int.from_bytes(b"oomrl", "big")
CREATE_RETRIES = 5


def create_tables(
    engine: sa.Engine, metadata: sa.MetaData, tables: list[sa.Table] | None = None
) -> None:
    """Create the tables of `metadata` that do not exist yet, even on a crowded first use.

    Several processes may use a database for the first time at once. Examples: four first
    rebalances, two first repairs. CREATE TABLE checks and creates in two steps, so two creators
    race. On PostgreSQL the loser hits a unique violation in pg_type; on SQLite, "table ... already
    exists". PostgreSQL's DDL is transactional. So there creation runs under a transaction-scoped
    advisory lock, and the second creator finds the tables made. Elsewhere a loser's "already
    exists" is retried: the check sees what the winner made."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            metadata.create_all(conn, tables=tables)
        return
    for attempt in range(CREATE_RETRIES):
        try:
            metadata.create_all(engine, tables=tables)
            return
        except (OperationalError, ProgrammingError) as exc:
            if "already exists" not in str(exc) or attempt == CREATE_RETRIES - 1:
                raise


def _booked_per_symbol() -> list[sa.Column]:
    """The leading columns of a row a rebalance books for one symbol on one date.

    Such rows are fills and corporate actions."""
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "rebalance_id", sa.Integer, sa.ForeignKey("rebalances.id"), nullable=False, index=True
        ),
        sa.Column("account", sa.String(64), nullable=False, index=True),
        sa.Column("date", sa.Date, nullable=False),
        sa.Column("symbol", sa.String(16), nullable=False),
    ]


def ledger_tables(metadata: sa.MetaData) -> dict[str, sa.Table]:
    money = sa.BigInteger  # fen
    t = {}
    t["accounts"] = sa.Table(
        "accounts",
        metadata,
        sa.Column("account", sa.String(64), primary_key=True),
        sa.Column("initial_cash_fen", money, nullable=False),
        sa.Column("cash_fen", money, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("halt_reason", sa.Text),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("last_date", sa.Date),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    t["account_events"] = sa.Table(
        "account_events",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account", sa.String(64), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("as_of", sa.Date),
        sa.Column("detail", sa.Text),
        sa.Column("at", sa.DateTime, nullable=False),
    )
    t["strategy_versions"] = sa.Table(
        "strategy_versions",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account", sa.String(64), nullable=False, index=True),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("activated_at", sa.DateTime, nullable=False),
    )
    t["rebalances"] = sa.Table(
        "rebalances",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account", sa.String(64), nullable=False),
        sa.Column("as_of", sa.Date, nullable=False),
        sa.Column("strategy", sa.String(64), nullable=False),
        sa.Column("strategy_version", sa.String(64), nullable=False),
        sa.Column("orders", sa.Integer, nullable=False),
        sa.Column("fills", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("account", "as_of", name="uq_rebalance_account_date"),
    )
    t["orders"] = sa.Table(
        "orders",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "rebalance_id", sa.Integer, sa.ForeignKey("rebalances.id"), nullable=False, index=True
        ),
        sa.Column("symbol", sa.String(16), nullable=False),
        sa.Column("side", sa.String(4), nullable=False),
        sa.Column("requested", sa.BigInteger, nullable=False),
        sa.Column("filled", sa.BigInteger, nullable=False),
        sa.Column("unfilled", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
    )
    t["fills"] = sa.Table(
        "fills",
        metadata,
        *_booked_per_symbol(),
        sa.Column("side", sa.String(4), nullable=False),
        sa.Column("quantity", sa.BigInteger, nullable=False),
        *[sa.Column(name, sa.Float, nullable=False) for name in FILL_COLUMNS[4:]],
        sa.Column("cash_delta_fen", money, nullable=False),
    )
    t["positions"] = sa.Table(
        "positions",
        metadata,
        sa.Column("account", sa.String(64), primary_key=True),
        sa.Column("symbol", sa.String(16), primary_key=True),
        sa.Column("quantity", sa.BigInteger, nullable=False),
    )
    t["nav"] = sa.Table(
        "nav",
        metadata,
        sa.Column("account", sa.String(64), primary_key=True),
        sa.Column("date", sa.Date, primary_key=True),
        *[sa.Column(name, sa.Float, nullable=False) for name in NAV_FIELDS],
        sa.Column("strategy_version", sa.String(64), nullable=False),
        sa.Column("rebalance_id", sa.Integer, sa.ForeignKey("rebalances.id")),
    )
    t["rewards"] = sa.Table(
        "rewards",
        metadata,
        sa.Column("account", sa.String(64), primary_key=True),
        sa.Column("date", sa.Date, primary_key=True),
        sa.Column("reward", sa.Float, nullable=False),
        sa.Column("lam", sa.Float, nullable=False),
        sa.Column("gamma", sa.Float, nullable=False),
    )
    t["corporate_actions"] = sa.Table(
        "corporate_actions",
        metadata,
        *_booked_per_symbol(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("ratio", sa.Float, nullable=False),
        sa.Column("shares_delta", sa.BigInteger, nullable=False),
        sa.Column("cash_fen", money, nullable=False),
    )
    t["probations"] = (
        sa.Table(  # a challenger's forward trial on a shadow book (oomrl/repair/probation.py)
            "probations",
            metadata,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("account", sa.String(64), nullable=False, index=True),
            sa.Column("shadow", sa.String(64), nullable=False, unique=True),
            sa.Column("tag", sa.String(32), nullable=False),
            sa.Column("sha", sa.String(64), nullable=False),
            sa.Column("strategy", sa.String(64), nullable=False),
            sa.Column("opened_on", sa.Date, nullable=False),  # the last session the repair saw
            sa.Column(
                "sessions", sa.Integer, nullable=False
            ),  # forward sessions before the chain decides
            sa.Column("status", sa.String(16), nullable=False),  # open, promoted, retired
            sa.Column("decided_on", sa.Date),
            sa.Column("decided_by", sa.Text),
            sa.Column("reason", sa.Text),
            sa.Column("evidence", sa.Text),  # JSON: the decision table
            sa.Column("created_at", sa.DateTime, nullable=False),
        )
    )
    t["alerts"] = sa.Table(
        "alerts",
        metadata,
        sa.Column("alert_id", sa.String(128), primary_key=True),
        sa.Column("account", sa.String(64), nullable=False, index=True),
        sa.Column("as_of", sa.Date, nullable=False),
        sa.Column("rule", sa.String(64), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    return t
