"""The ledger's LLM budget tables (`llm_budgets`, `llm_calls`) and an account's cost of alignment.

The agent's budget book keeps the tables. Reports show the cost of alignment beside the PnL. Money
is integer nano-USD, so prices per million tokens stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

NANO = 1_000_000_000


@dataclass(frozen=True)
class CostOfAlignment:
    """What an account's repairs have cost in model calls, and what its LLM budget has left."""

    repairs: int
    calls: int
    tokens: int
    cost_usd: float
    tokens_left: int
    usd_left: float


def budget_tables(metadata: sa.MetaData) -> dict[str, sa.Table]:
    """The two tables on `metadata` (defined once; later calls return the same tables)."""
    prefix = f"{metadata.schema}." if metadata.schema else ""
    if f"{prefix}llm_budgets" in metadata.tables:
        return {name: metadata.tables[f"{prefix}{name}"] for name in ("llm_budgets", "llm_calls")}
    big = sa.BigInteger
    budgets = sa.Table(
        "llm_budgets",
        metadata,
        sa.Column("account", sa.String(64), primary_key=True),
        *[
            sa.Column(name, big, nullable=False)
            for name in (
                "tokens_limit",
                "nusd_limit",
                "tokens_spent",
                "nusd_spent",
                "tokens_held",
                "nusd_held",
            )
        ],
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    calls = sa.Table(
        "llm_calls",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account", sa.String(64), nullable=False, index=True),
        sa.Column("run", sa.String(160), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),  # reserved|settled|released|abandoned
        sa.Column("held_tokens", big, nullable=False),
        sa.Column("held_nusd", big, nullable=False),
        sa.Column("prompt_tokens", big, nullable=False, default=0),
        sa.Column("completion_tokens", big, nullable=False, default=0),
        sa.Column("cost_nusd", big, nullable=False, default=0),
        sa.Column("tokens_left_after", big),
        sa.Column("nusd_left_after", big),
        sa.Column("model", sa.String(128), nullable=False, default=""),
        sa.Column("detail", sa.Text),
        sa.Column("reserved_at", sa.DateTime, nullable=False),
        sa.Column("settled_at", sa.DateTime),
    )
    return {"llm_budgets": budgets, "llm_calls": calls}


def read_cost_of_alignment(ledger: Any, account: str) -> CostOfAlignment | None:
    """The account's cost of alignment from a ledger, creating nothing (None without a budget)."""
    tables = budget_tables(ledger.metadata)
    schema = ledger.metadata.schema
    if not sa.inspect(ledger.engine).has_table("llm_budgets", schema=schema):
        return None
    return cost_of_alignment(ledger.engine, tables, account)


def cost_of_alignment(
    engine: sa.Engine, t: dict[str, sa.Table], account: str
) -> CostOfAlignment | None:
    b, c = t["llm_budgets"], t["llm_calls"]
    with engine.connect() as conn:
        budget = conn.execute(sa.select(b).where(b.c.account == account)).mappings().first()
        if budget is None:
            return None
        settled = list(
            conn.execute(
                sa.select(c).where(c.c.account == account, c.c.status.in_(("settled", "abandoned")))
            ).mappings()
        )
    return CostOfAlignment(
        repairs=len({row["run"] for row in settled}),
        calls=len(settled),
        tokens=sum(row["prompt_tokens"] + row["completion_tokens"] for row in settled),
        cost_usd=sum(row["cost_nusd"] for row in settled) / NANO,
        tokens_left=budget["tokens_limit"] - budget["tokens_spent"] - budget["tokens_held"],
        usd_left=(budget["nusd_limit"] - budget["nusd_spent"] - budget["nusd_held"]) / NANO,
    )
