"""The SQL ledger (SQLAlchemy Core, any URL): accounts, versions, rebalances, orders, fills, NAV,
alerts.

A rebalance for (account, date) commits in one transaction and at most once. Its row carries a
unique constraint. Cash is updated under an optimistic revision check. A crash before COMMIT leaves
nothing behind. Cash is kept in integer fen so it reconciles exactly with the fills.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from oomrl.errors import LedgerConflictError, OomrlError
from oomrl.files import private_file, sqlite_file
from oomrl.portfolio.killswitch import AccountStatus
from oomrl.portfolio.ledger_tables import (
    FILL_COLUMNS,
    NAV_COLUMNS,
    NAV_FIELDS,
    create_tables,
    driver_url,
    ledger_tables,
)


@dataclass(frozen=True)
class AlertRow:
    """An alert as the ledger stores it: its id, date and rule, and its JSON payload."""

    alert_id: str
    as_of: date
    rule: str
    payload: dict[str, Any]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass
class AccountState:
    """An account as the ledger holds it now."""

    account: str
    status: AccountStatus
    initial_cash_fen: int
    cash_fen: int
    revision: int
    last_date: date | None
    halt_reason: str | None
    positions: dict[str, int] = field(default_factory=dict)


@dataclass
class RebalanceRecord:
    """Everything one rebalance writes; committed all-or-nothing by Ledger.commit_rebalance."""

    account: str
    as_of: date
    strategy: str
    strategy_version: str
    expected_revision: int
    cash_fen: int
    positions: dict[str, int]
    orders: pd.DataFrame
    fills: pd.DataFrame
    nav: pd.DataFrame  # NAV_COLUMNS rows, one per session up to as_of
    lam: float
    gamma: float
    halt_reason: str | None = None
    # Corporate actions (ACTION_COLUMNS)
    actions: pd.DataFrame = field(default_factory=pd.DataFrame)


class Ledger:
    """The ledger on any SQLAlchemy URL; `schema` places the tables in a PostgreSQL schema."""

    def __init__(self, url: str, schema: str | None = None) -> None:
        self.url = driver_url(url)
        if (database := sqlite_file(self.url)) is not None:
            # 0600 before SQLite creates it (its journals copy the mode)
            private_file(database, tighten=True)
        self.engine = sa.create_engine(self.url, future=True)
        self.metadata = sa.MetaData(schema=schema)
        self.t = ledger_tables(self.metadata)

    def create_schema(self) -> None:
        """Create every table that does not exist yet (safe when several processes start at
        once)."""
        create_tables(self.engine, self.metadata)

    def drop_schema(self) -> None:
        """Drop every ledger table (tests)."""
        self.metadata.drop_all(self.engine)

    # -- accounts ---------------------------------------------------------------------------
    def open_account(self, account: str, initial_cash: float) -> AccountState:
        """The account, created with `initial_cash` when it does not exist yet."""
        if initial_cash <= 0:
            raise OomrlError(f"initial cash must be > 0, got {initial_cash}")
        fen = round(initial_cash * 100)
        with self.engine.begin() as conn:
            exists = conn.execute(
                sa.select(self.t["accounts"].c.account).where(
                    self.t["accounts"].c.account == account
                )
            ).first()
            if exists is None:
                conn.execute(
                    self.t["accounts"]
                    .insert()
                    .values(
                        account=account,
                        initial_cash_fen=fen,
                        cash_fen=fen,
                        status=AccountStatus.ACTIVE.value,
                        revision=0,
                        created_at=_now(),
                    )
                )
        return self.account(account)

    def account(self, account: str) -> AccountState:
        """The account's current state with its positions; OomrlError when unknown."""
        acc = self.t["accounts"]
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(acc).where(acc.c.account == account)).mappings().first()
            if row is None:
                raise OomrlError(f"no account {account!r} in the ledger {self._where()}")
            pos = self.t["positions"]
            held = conn.execute(
                sa.select(pos.c.symbol, pos.c.quantity).where(pos.c.account == account)
            ).all()
        return AccountState(
            account,
            AccountStatus(row["status"]),
            int(row["initial_cash_fen"]),
            int(row["cash_fen"]),
            int(row["revision"]),
            row["last_date"],
            row["halt_reason"],
            {s: int(q) for s, q in held},
        )

    def _where(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def halt(self, account: str, as_of: date | None, reason: str) -> None:
        """Put the account in the absorbing HALTED state and record why."""
        with self.engine.begin() as conn:
            self._halt(conn, account, as_of, reason)

    def _halt(self, conn: Connection, account: str, as_of: date | None, reason: str) -> None:
        acc = self.t["accounts"]
        conn.execute(
            acc.update()
            .where(acc.c.account == account)
            .values(
                status=AccountStatus.HALTED.value, halt_reason=reason, revision=acc.c.revision + 1
            )
        )
        conn.execute(
            self.t["account_events"]
            .insert()
            .values(account=account, kind="halted", as_of=as_of, detail=reason, at=_now())
        )

    def resume(self, account: str, by: str) -> None:
        """A person lifts the halt; recorded as an event."""
        state = self.account(account)
        if state.status is not AccountStatus.HALTED:
            raise OomrlError(f"account {account!r} is not halted")
        acc = self.t["accounts"]
        with self.engine.begin() as conn:
            conn.execute(
                acc.update()
                .where(acc.c.account == account)
                .values(
                    status=AccountStatus.ACTIVE.value, halt_reason=None, revision=acc.c.revision + 1
                )
            )
            conn.execute(
                self.t["account_events"]
                .insert()
                .values(account=account, kind="resumed", detail=f"resumed by {by}", at=_now())
            )

    def record_event(self, account: str, kind: str, as_of: date | None, detail: str) -> None:
        """Note something that happened to an account (e.g. a repair requested for an alert)."""
        with self.engine.begin() as conn:
            conn.execute(
                self.t["account_events"]
                .insert()
                .values(account=account, kind=kind, as_of=as_of, detail=detail, at=_now())
            )

    def events(self, account: str) -> list[dict[str, Any]]:
        """Halts, resumes and repair requests of an account, oldest first."""
        ev = self.t["account_events"]
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(ev).where(ev.c.account == account).order_by(ev.c.id))
            return [dict(r) for r in rows.mappings()]

    # -- strategy versions ------------------------------------------------------------------
    def set_active_version(self, account: str, sha: str, name: str) -> None:
        """Record that `account` now trades strategy `name` at version `sha`."""
        with self.engine.begin() as conn:
            conn.execute(
                self.t["strategy_versions"]
                .insert()
                .values(account=account, sha=sha, name=name, activated_at=_now())
            )

    def active_version(self, account: str) -> str | None:
        """The SHA of the version the account trades, or None."""
        active = self.active_strategy(account)
        return active[0] if active else None

    def active_strategy(self, account: str) -> tuple[str, str] | None:
        """(sha, strategy name) of the active version, or None."""
        sv = self.t["strategy_versions"]
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(sv.c.sha, sv.c.name)
                .where(sv.c.account == account)
                .order_by(sv.c.id.desc())
                .limit(1)
            ).first()
        return (row[0], row[1]) if row else None

    def active_versions(self) -> dict[str, str]:
        """The version every account trades now (account -> sha): the last activation of each."""
        sv = self.t["strategy_versions"]
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(sv.c.account, sv.c.sha).order_by(sv.c.id)).all()
        return {str(account): str(sha) for account, sha in rows}  # later rows win

    def version_names(self, account: str) -> dict[str, str]:
        """Strategy name of every version the account ever activated (sha -> name), for labels."""
        sv = self.t["strategy_versions"]
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(sv.c.sha, sv.c.name).where(sv.c.account == account).order_by(sv.c.id)
            ).all()
        return {str(sha): str(name) for sha, name in rows}

    # -- probations (oomrl/repair/probation.py) -----------------------------------------------
    def open_probation(self, row: dict[str, Any], initial_cash_fen: int) -> None:
        """Open the shadow book, point it at the challenger and record the probation.

        All in one transaction. The shadow's active version is a promotion's commit point: it
        exists only with its probation."""
        acc = self.t["accounts"]
        with self.engine.begin() as conn:
            conn.execute(
                acc.insert().values(
                    account=row["shadow"],
                    initial_cash_fen=initial_cash_fen,
                    cash_fen=initial_cash_fen,
                    status=AccountStatus.ACTIVE.value,
                    revision=0,
                    created_at=_now(),
                )
            )
            conn.execute(
                self.t["strategy_versions"]
                .insert()
                .values(
                    account=row["shadow"], sha=row["sha"], name=row["strategy"], activated_at=_now()
                )
            )
            conn.execute(
                self.t["probations"].insert().values(**row, status="open", created_at=_now())
            )

    def probations(self, account: str | None = None) -> list[dict[str, Any]]:
        """Every probation (of `account`), oldest first."""
        pr = self.t["probations"]
        query = sa.select(pr).order_by(pr.c.id)
        if account is not None:
            query = query.where(pr.c.account == account)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def close_probation(
        self,
        probation_id: int,
        status: str,
        decided_on: date,
        by: str,
        reason: str,
        evidence: dict[str, Any],
        alert: AlertRow | None = None,
    ) -> bool:
        """Decide an open probation, all in one transaction.

        Its shadow book closes and, when promoted, the account trades the challenger. A
        retirement's `alert` (its forward autopsy) becomes the account's alert. False when it was
        no longer open (decided meanwhile)."""
        pr, acc = self.t["probations"], self.t["accounts"]
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(pr).where(pr.c.id == probation_id)).mappings().first()
            done = conn.execute(
                pr.update()
                .where(pr.c.id == probation_id, pr.c.status == "open")
                .values(
                    status=status,
                    decided_on=decided_on,
                    decided_by=by,
                    reason=reason,
                    evidence=json.dumps(evidence, sort_keys=True, default=str),
                )
            )
            if row is None or done.rowcount != 1:
                return False
            conn.execute(
                acc.update()
                .where(acc.c.account == row["shadow"])
                .values(status=AccountStatus.CLOSED.value, revision=acc.c.revision + 1)
            )
            conn.execute(
                self.t["account_events"]
                .insert()
                .values(
                    account=row["account"],
                    kind=status,
                    as_of=decided_on,
                    at=_now(),
                    detail=f"{row['tag']} {status} after probation by {by}: {reason}"[:2000],
                )
            )
            if status == "promoted":
                conn.execute(
                    self.t["strategy_versions"]
                    .insert()
                    .values(
                        account=row["account"],
                        sha=row["sha"],
                        name=row["strategy"],
                        activated_at=_now(),
                    )
                )
            if alert is not None:
                conn.execute(
                    self.t["alerts"]
                    .insert()
                    .values(
                        alert_id=alert.alert_id,
                        account=row["account"],
                        as_of=alert.as_of,
                        rule=alert.rule,
                        payload=json.dumps(alert.payload, default=str, sort_keys=True),
                        created_at=_now(),
                    )
                )
        return True

    # -- rebalances -------------------------------------------------------------------------
    def rebalance_id(self, account: str, as_of: date) -> int | None:
        """Id of the committed rebalance of (account, as_of), or None."""
        rb = self.t["rebalances"]
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(rb.c.id).where(rb.c.account == account, rb.c.as_of == as_of)
            ).scalar()

    def commit_rebalance(self, record: RebalanceRecord) -> bool:
        """Write one rebalance atomically; False (and nothing written) when it exists already."""
        try:
            with self.engine.begin() as conn:
                rebalance_id = self._insert_rebalance(conn, record)
                self._update_account(conn, record)
                self._insert_orders(conn, rebalance_id, record)
                self._insert_fills(conn, rebalance_id, record)
                self._replace_positions(conn, record)
                self._insert_nav(conn, rebalance_id, record)
                self._insert_actions(conn, rebalance_id, record)
                if record.halt_reason:
                    self._halt(conn, record.account, record.as_of, record.halt_reason)
        except sa.exc.IntegrityError:
            if self.rebalance_id(record.account, record.as_of) is not None:
                return False
            raise
        return True

    def _insert_rebalance(self, conn: Connection, record: RebalanceRecord) -> int:
        result = conn.execute(
            self.t["rebalances"]
            .insert()
            .values(
                account=record.account,
                as_of=record.as_of,
                strategy=record.strategy,
                strategy_version=record.strategy_version,
                orders=len(record.orders),
                fills=len(record.fills),
                created_at=_now(),
            )
        )
        return int(result.inserted_primary_key[0])  # type: ignore[index]  # set by an INSERT

    def _update_account(self, conn: Connection, record: RebalanceRecord) -> None:
        acc = self.t["accounts"]
        result = conn.execute(
            acc.update()
            .where(
                acc.c.account == record.account,
                acc.c.revision == record.expected_revision,
                acc.c.status == AccountStatus.ACTIVE.value,
            )
            .values(cash_fen=record.cash_fen, revision=acc.c.revision + 1, last_date=record.as_of)
        )
        if result.rowcount != 1:
            raise LedgerConflictError(
                f"account {record.account!r} changed (or was halted) while its {record.as_of} "
                "rebalance was being planned; nothing was written, plan again"
            )

    def _insert_orders(self, conn: Connection, rebalance_id: int, record: RebalanceRecord) -> None:
        rows = [
            {
                "rebalance_id": rebalance_id,
                **{
                    k: r[k] for k in ("symbol", "side", "requested", "filled", "unfilled", "reason")
                },
            }
            for r in record.orders.to_dict("records")
        ]
        if rows:
            conn.execute(self.t["orders"].insert(), _plain(rows))

    def _insert_fills(self, conn: Connection, rebalance_id: int, record: RebalanceRecord) -> None:
        rows = [
            {
                "rebalance_id": rebalance_id,
                "account": record.account,
                "date": record.as_of,
                **{k: r[k] for k in FILL_COLUMNS[1:] + ["cash_delta_fen"]},
            }
            for r in record.fills.to_dict("records")
        ]
        if rows:
            conn.execute(self.t["fills"].insert(), _plain(rows))

    def _replace_positions(self, conn: Connection, record: RebalanceRecord) -> None:
        pos = self.t["positions"]
        conn.execute(pos.delete().where(pos.c.account == record.account))
        rows = [
            {"account": record.account, "symbol": s, "quantity": int(q)}
            for s, q in sorted(record.positions.items())
            if q
        ]
        if rows:
            conn.execute(pos.insert(), rows)

    def _insert_nav(self, conn: Connection, rebalance_id: int, record: RebalanceRecord) -> None:
        self._write_nav(
            conn, record.account, record.nav, record.lam, record.gamma, rebalance_id, record.as_of
        )

    def _write_nav(
        self,
        conn: Connection,
        account: str,
        frame: pd.DataFrame,
        lam: float,
        gamma: float,
        rebalance_id: int | None = None,
        rebalance_day: date | None = None,
    ) -> None:
        """NAV and reward rows. A day's provisional mark (no rebalance) gives way to the new row."""
        navs, rewards = [], []
        for r in frame.to_dict("records"):
            day = pd.Timestamp(r["date"]).date()
            navs.append(
                {
                    "account": account,
                    "date": day,
                    "strategy_version": r["strategy_version"],
                    "rebalance_id": rebalance_id if day == rebalance_day else None,
                    **{k: r[k] for k in NAV_FIELDS},
                }
            )
            rewards.append(
                {"account": account, "date": day, "reward": r["reward"], "lam": lam, "gamma": gamma}
            )
        if not navs:
            return
        nav, rw = self.t["nav"], self.t["rewards"]
        days = [row["date"] for row in navs]
        marked = [
            d
            for (d,) in conn.execute(
                sa.select(nav.c.date).where(
                    nav.c.account == account, nav.c.date.in_(days), nav.c.rebalance_id.is_(None)
                )
            )
        ]
        if marked:
            conn.execute(nav.delete().where(nav.c.account == account, nav.c.date.in_(marked)))
            conn.execute(rw.delete().where(rw.c.account == account, rw.c.date.in_(marked)))
        conn.execute(nav.insert(), _plain(navs))
        conn.execute(rw.insert(), _plain(rewards))

    def commit_marks(
        self,
        account: str,
        expected_revision: int,
        nav: pd.DataFrame,
        lam: float,
        gamma: float,
        halt_on: date | None = None,
        halt_reason: str | None = None,
    ) -> None:
        """Write mark-to-market NAV rows (no trades) in one transaction.

        The account halts when the kill switch tripped. LedgerConflictError when the account
        changed since the marks were planned."""
        acc = self.t["accounts"]
        with self.engine.begin() as conn:
            result = conn.execute(
                acc.update()
                .where(
                    acc.c.account == account,
                    acc.c.revision == expected_revision,
                    acc.c.status == AccountStatus.ACTIVE.value,
                )
                .values(revision=acc.c.revision + 1)
            )
            if result.rowcount != 1:
                raise LedgerConflictError(
                    f"account {account!r} changed (or was halted) while its marks "
                    "were being planned; nothing was written"
                )
            self._write_nav(conn, account, nav, lam, gamma)
            if halt_reason:
                self._halt(conn, account, halt_on, halt_reason)

    def account_names(self) -> list[str]:
        """Every account in the ledger, by name."""
        acc = self.t["accounts"]
        with self.engine.connect() as conn:
            return [
                name for (name,) in conn.execute(sa.select(acc.c.account).order_by(acc.c.account))
            ]

    def _insert_actions(self, conn: Connection, rebalance_id: int, record: RebalanceRecord) -> None:
        rows = [
            {
                "rebalance_id": rebalance_id,
                "account": record.account,
                "date": pd.Timestamp(r["date"]).date(),
                "symbol": r["symbol"],
                "kind": r["kind"],
                "ratio": float(r["ratio"]),
                "shares_delta": int(r["shares_delta"]),
                "cash_fen": int(r["cash_fen"]),
            }
            for r in record.actions.to_dict("records")
        ]
        if rows:
            conn.execute(self.t["corporate_actions"].insert(), _plain(rows))

    def actions_frame(self, account: str) -> pd.DataFrame:
        """Corporate actions booked for an account: date, symbol, kind, ratio, shares_delta,
        cash_fen."""
        ca = self.t["corporate_actions"]
        columns = ["date", "symbol", "kind", "ratio", "shares_delta", "cash_fen"]
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    sa.select(*[ca.c[c] for c in columns])
                    .where(ca.c.account == account)
                    .order_by(ca.c.date, ca.c.symbol)
                )
                .mappings()
                .all()
            )
        return pd.DataFrame(rows, columns=columns)

    # -- reading ----------------------------------------------------------------------------
    def nav_frame(self, account: str) -> pd.DataFrame:
        """Daily NAV rows: date, nav, cash, market_value, returns, leakage, turnover, costs, ..."""
        nav, rw = self.t["nav"], self.t["rewards"]
        query = (
            sa.select(
                nav.c.date, *[nav.c[k] for k in NAV_FIELDS], rw.c.reward, nav.c.strategy_version
            )
            .select_from(
                nav.outerjoin(rw, sa.and_(rw.c.account == nav.c.account, rw.c.date == nav.c.date))
            )
            .where(nav.c.account == account)
            .order_by(nav.c.date)
        )
        with self.engine.connect() as conn:
            frame = pd.DataFrame(
                conn.execute(query).mappings().all(),
                columns=["date", *NAV_FIELDS, "reward", "strategy_version"],
            )
        frame["date"] = pd.to_datetime(frame["date"])
        return frame[NAV_COLUMNS]

    def fills_frame(
        self, account: str, start: date | None = None, end: date | None = None
    ) -> pd.DataFrame:
        """Fills of an account (optionally within [start, end]) with their cost breakdown."""
        fl = self.t["fills"]
        query = sa.select(*[fl.c[k] for k in FILL_COLUMNS]).where(fl.c.account == account)
        if start is not None:
            query = query.where(fl.c.date >= pd.Timestamp(start).date())
        if end is not None:
            query = query.where(fl.c.date <= pd.Timestamp(end).date())
        with self.engine.connect() as conn:
            frame = pd.DataFrame(
                conn.execute(query.order_by(fl.c.id)).mappings().all(), columns=FILL_COLUMNS
            )
        frame["date"] = pd.to_datetime(frame["date"])
        return frame

    def orders_frame(self, account: str, as_of: date) -> pd.DataFrame:
        """Orders of one committed rebalance."""
        od, rb = self.t["orders"], self.t["rebalances"]
        query = (
            sa.select(
                od.c.symbol, od.c.side, od.c.requested, od.c.filled, od.c.unfilled, od.c.reason
            )
            .join(rb, rb.c.id == od.c.rebalance_id)
            .where(rb.c.account == account, rb.c.as_of == as_of)
            .order_by(od.c.id)
        )
        with self.engine.connect() as conn:
            return pd.DataFrame(
                conn.execute(query).mappings().all(),
                columns=["symbol", "side", "requested", "filled", "unfilled", "reason"],
            )

    def reconcile(self, account: str) -> list[str]:
        """Mismatches between cash/positions and the fills and corporate actions that made them."""
        state = self.account(account)
        fl, ca = self.t["fills"], self.t["corporate_actions"]
        signed = sa.case((fl.c.side == "buy", fl.c.quantity), else_=-fl.c.quantity)
        with self.engine.connect() as conn:
            delta = conn.execute(
                sa.select(sa.func.coalesce(sa.func.sum(fl.c.cash_delta_fen), 0)).where(
                    fl.c.account == account
                )
            ).scalar_one()
            income = conn.execute(
                sa.select(sa.func.coalesce(sa.func.sum(ca.c.cash_fen), 0)).where(
                    ca.c.account == account
                )
            ).scalar_one()
            net = dict(
                conn.execute(
                    sa.select(fl.c.symbol, sa.func.sum(signed))
                    .where(fl.c.account == account)
                    .group_by(fl.c.symbol)
                ).all()
            )
            for symbol, shares in conn.execute(
                sa.select(ca.c.symbol, sa.func.sum(ca.c.shares_delta))
                .where(ca.c.account == account)
                .group_by(ca.c.symbol)
            ):
                net[symbol] = int(net.get(symbol, 0)) + int(shares)
        problems = []
        if state.initial_cash_fen + int(delta) + int(income) != state.cash_fen:
            problems.append(
                f"cash {state.cash_fen} fen != initial {state.initial_cash_fen} "
                f"+ fills {int(delta)} + corporate actions {int(income)}"
            )
        for symbol in sorted(set(net) | set(state.positions)):
            if int(net.get(symbol, 0)) != state.positions.get(symbol, 0):
                problems.append(
                    f"{symbol}: position {state.positions.get(symbol, 0)} != "
                    f"net fills and share changes {int(net.get(symbol, 0))}"
                )
        return problems

    # -- alerts -----------------------------------------------------------------------------
    def insert_alert(
        self, account: str, alert_id: str, as_of: date, rule: str, payload: dict[str, Any]
    ) -> bool:
        """Store an alert once; False when its id is already there."""
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    self.t["alerts"]
                    .insert()
                    .values(
                        alert_id=alert_id,
                        account=account,
                        as_of=pd.Timestamp(as_of).date(),
                        rule=rule,
                        payload=json.dumps(payload, default=str, sort_keys=True),
                        created_at=_now(),
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def alerts(self, account: str) -> list[dict[str, Any]]:
        """Alerts of an account, oldest first, payload decoded."""
        al = self.t["alerts"]
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    sa.select(al)
                    .where(al.c.account == account)
                    .order_by(al.c.created_at, al.c.alert_id)
                )
                .mappings()
                .all()
            )
        return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """numpy scalars to Python values, so every DB-API driver accepts them."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in rows]
