"""The LLM budget per account, in the ledger: a balance of tokens and money, a journal of calls.

Table `llm_budgets` has one row per account: limits, spent, held by calls in flight. Table
`llm_calls` has one row per model call: reserved, then settled or released. Money is integer
nano-USD, so prices per million tokens stay exact. A reservation is one conditional UPDATE. So two
repairs of one account at once can never both take the last of its budget.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any

import sqlalchemy as sa

from oomrl.errors import BudgetBookError, OutOfMoneyError
from oomrl.portfolio.budget_tables import NANO, CostOfAlignment, budget_tables, cost_of_alignment
from oomrl.portfolio.ledger_tables import create_tables

logger = logging.getLogger(__name__)


def to_nano(usd: float) -> int:
    """USD as integer nano-USD, rounded up: a cost is never booked below what it was."""
    return int((Decimal(repr(float(usd))) * NANO).to_integral_value(rounding=ROUND_CEILING))


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Balance:
    """An account's LLM budget now.

    `*_left` goes below zero only if a server bills past a reservation."""

    account: str
    tokens_limit: int
    tokens_spent: int
    tokens_held: int
    usd_limit: float
    usd_spent: float
    usd_held: float

    @property
    def tokens_left(self) -> int:
        return self.tokens_limit - self.tokens_spent - self.tokens_held

    @property
    def usd_left(self) -> float:
        return self.usd_limit - self.usd_spent - self.usd_held

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "tokens_left": self.tokens_left,
            "usd_left": round(self.usd_left, 9),
        }


class LLMBudgetBook:
    """The per-account LLM budget on a ledger's database (any SQLAlchemy URL)."""

    def __init__(self, ledger: Any) -> None:
        self.engine: sa.Engine = ledger.engine
        self.t = budget_tables(ledger.metadata)
        create_tables(self.engine, ledger.metadata, list(self.t.values()))

    def open_account(self, account: str, tokens: int, usd: float) -> Balance:
        """The account's budget, created with these limits when it has none yet."""
        if not account:
            raise BudgetBookError("an LLM budget needs an account name")
        if tokens <= 0 or usd <= 0:
            raise BudgetBookError(
                f"an LLM budget needs positive limits, got {tokens} tokens, ${usd}"
            )
        b = self.t["llm_budgets"]
        try:
            with self.engine.begin() as conn:
                if (
                    conn.execute(sa.select(b.c.account).where(b.c.account == account)).first()
                    is None
                ):
                    conn.execute(
                        b.insert().values(
                            account=account,
                            tokens_limit=tokens,
                            nusd_limit=to_nano(usd),
                            tokens_spent=0,
                            nusd_spent=0,
                            tokens_held=0,
                            nusd_held=0,
                            updated_at=_now(),
                        )
                    )
        except sa.exc.IntegrityError:
            pass  # another process opened it first: its limits stand
        return self.balance(account)

    def fund(self, account: str, tokens: int = 0, usd: float = 0.0) -> Balance:
        """Add capital to an account's budget (negative amounts withdraw unspent capital)."""
        b = self.t["llm_budgets"]
        with self.engine.begin() as conn:
            done = conn.execute(
                b.update()
                .where(b.c.account == account)
                .values(
                    tokens_limit=b.c.tokens_limit + tokens,
                    nusd_limit=b.c.nusd_limit + (to_nano(usd) if usd >= 0 else -to_nano(-usd)),
                    updated_at=_now(),
                )
            )
            if done.rowcount == 0:
                raise BudgetBookError(f"account {account!r} has no LLM budget to fund")
        logger.info("LLM budget of account %r funded: %+d tokens, $%+.4f", account, tokens, usd)
        return self.balance(account)

    # Alike ledger.Ledger.account (one row by account, or a named error): two tables, two errors.
    def balance(self, account: str) -> Balance:
        b = self.t["llm_budgets"]
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(b).where(b.c.account == account)).mappings().first()
        if row is None:
            raise BudgetBookError(f"account {account!r} has no LLM budget in the ledger")
        return Balance(
            account=account,
            tokens_limit=row["tokens_limit"],
            tokens_spent=row["tokens_spent"],
            tokens_held=row["tokens_held"],
            usd_limit=row["nusd_limit"] / NANO,
            usd_spent=row["nusd_spent"] / NANO,
            usd_held=row["nusd_held"] / NANO,
        )

    def reserve(self, account: str, run: str, role: str, tokens: int, usd: float) -> int:
        """Hold `tokens` and `usd` for one call, atomically, or raise OutOfMoneyError; the call's
        id."""
        if tokens < 0 or usd < 0:
            raise BudgetBookError("a reservation cannot be negative")
        b, c = self.t["llm_budgets"], self.t["llm_calls"]
        nusd = to_nano(usd)
        with self.engine.begin() as conn:
            held = conn.execute(
                b.update()
                .where(
                    b.c.account == account,
                    b.c.tokens_limit - b.c.tokens_spent - b.c.tokens_held >= tokens,
                    b.c.nusd_limit - b.c.nusd_spent - b.c.nusd_held >= nusd,
                )
                .values(
                    tokens_held=b.c.tokens_held + tokens,
                    nusd_held=b.c.nusd_held + nusd,
                    updated_at=_now(),
                )
            )
            if held.rowcount == 1:
                return int(
                    conn.execute(
                        c.insert().values(
                            account=account,
                            run=run,
                            role=role,
                            status="reserved",
                            held_tokens=tokens,
                            held_nusd=nusd,
                            prompt_tokens=0,
                            completion_tokens=0,
                            cost_nusd=0,
                            model="",
                            reserved_at=_now(),
                        )
                    ).inserted_primary_key[0]  # type: ignore[index]  # set by an INSERT
                )
        left = self.balance(account)  # raises when the account has no budget at all
        logger.warning(
            "LLM budget of account %r refused %s: needs %d tokens, $%.4f; has %d tokens, $%.4f",
            account,
            role,
            tokens,
            usd,
            left.tokens_left,
            left.usd_left,
        )
        raise OutOfMoneyError(
            f"out of money: account {account!r} cannot afford the next step ({role} needs up to "
            f"{tokens} tokens, ${usd:.4f}; the account has {left.tokens_left} tokens, "
            f"${left.usd_left:.4f} left)"
        )

    def settle(
        self, call_id: int, prompt_tokens: int, completion_tokens: int, usd: float, model: str
    ) -> Balance:
        """Debit what a call cost and free its reservation, in one transaction.

        Returns the balance after."""
        return self._close(
            call_id, "settled", prompt_tokens, completion_tokens, to_nano(usd), model, None
        )

    def release(self, call_id: int, why: str) -> Balance:
        """Free a reservation whose call ended without an answer; nothing is debited."""
        return self._close(call_id, "released", 0, 0, 0, "", why[:2000])

    def _close(
        self,
        call_id: int,
        status: str,
        prompt: int | None,
        completion: int,
        nusd: int | None,
        model: str,
        detail: str | None,
    ) -> Balance:
        """Close a reservation; `prompt` and `nusd` None charge what was held."""
        b, c = self.t["llm_budgets"], self.t["llm_calls"]
        with self.engine.begin() as conn:
            call = conn.execute(sa.select(c).where(c.c.id == call_id)).mappings().first()
            if call is None or call["status"] != "reserved":
                raise BudgetBookError(f"LLM call {call_id} is not an open reservation")
            prompt = call["held_tokens"] if prompt is None else prompt
            nusd = call["held_nusd"] if nusd is None else nusd
            conn.execute(
                b.update()
                .where(b.c.account == call["account"])
                .values(
                    tokens_held=b.c.tokens_held - call["held_tokens"],
                    nusd_held=b.c.nusd_held - call["held_nusd"],
                    tokens_spent=b.c.tokens_spent + prompt + completion,
                    nusd_spent=b.c.nusd_spent + nusd,
                    updated_at=_now(),
                )
            )
            row = conn.execute(sa.select(b).where(b.c.account == call["account"])).mappings().one()
            conn.execute(
                c.update()
                .where(c.c.id == call_id)
                .values(
                    status=status,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    cost_nusd=nusd,
                    model=model,
                    detail=detail,
                    settled_at=_now(),
                    tokens_left_after=row["tokens_limit"]
                    - row["tokens_spent"]
                    - row["tokens_held"],
                    nusd_left_after=row["nusd_limit"] - row["nusd_spent"] - row["nusd_held"],
                )
            )
        return self.balance(call["account"])

    def settle_abandoned(self, account: str, older_than_s: float = 3600.0) -> int:
        """Charge reservations no call settled within `older_than_s`: their repair was killed.

        The request may have been billed, so the reservation is what it cost. Returns how many
        there were."""
        c = self.t["llm_calls"]
        cutoff = _now() - timedelta(seconds=older_than_s)
        with self.engine.connect() as conn:
            stale = [
                row["id"]
                for row in conn.execute(
                    sa.select(c.c.id).where(
                        c.c.account == account, c.c.status == "reserved", c.c.reserved_at <= cutoff
                    )
                ).mappings()
            ]
        for call_id in stale:
            with contextlib.suppress(BudgetBookError):  # another process closed it meanwhile
                self._close(
                    call_id,
                    "abandoned",
                    None,
                    0,
                    None,
                    "",
                    "abandoned: the repair ended without settling; charged its reservation",
                )
        if stale:
            logger.warning(
                "charged %d abandoned LLM reservation(s) of account %r", len(stale), account
            )
        return len(stale)

    def calls(self, account: str) -> list[dict[str, Any]]:
        """The account's call journal, oldest first."""
        c = self.t["llm_calls"]
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(c).where(c.c.account == account).order_by(c.c.id)
            ).mappings()
            return [dict(row) for row in rows]

    def cost_of_alignment(self, account: str) -> CostOfAlignment | None:
        """What repairs have cost the account in model calls. None when it has no LLM budget."""
        return cost_of_alignment(self.engine, self.t, account)
