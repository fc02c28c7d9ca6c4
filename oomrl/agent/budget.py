"""The compute budget of a repair (per repair, and per account in the ledger): compute is capital.

Every model call reserves what it may cost at most before it is sent. That is its prompt's token
bound plus its declared `max_tokens`. It is debited what it did cost before its answer is used. A
call that cannot be afforded is never sent, and the repair stops with that reason.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from oomrl.errors import OutOfMoneyError
from oomrl.settings import AgentSettings

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from oomrl.agent.capital import LLMBudgetBook

# Byte-level BPE tokens of code, JSON and English average 3.5-4.5 bytes. So a third of the UTF-8
# size bounds a prompt from above. The chat format adds a few tokens per message.
BYTES_PER_TOKEN_BOUND = 3
TOKENS_PER_MESSAGE = 8


class Usage(BaseModel):
    """Tokens one response used, as the `usage` field reports them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def prompt_token_bound(messages: list[dict[str, str]]) -> int:
    """An upper bound on the prompt tokens of a chat request, from its UTF-8 size."""
    size = sum(len(m.get("content", "").encode("utf-8")) for m in messages)
    return math.ceil(size / BYTES_PER_TOKEN_BOUND) + TOKENS_PER_MESSAGE * (len(messages) + 1)


@dataclass
class Reservation:
    """What one call may cost at most. It is held against the budget until the call is settled."""

    role: str
    prompt_tokens: int
    max_tokens: int
    cost_usd: float
    book_id: int | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens


@dataclass
class Budget:
    """Token and money limits of one repair, what it spent, and the account capital behind it."""

    max_tokens: int
    max_cost_usd: float
    price_prompt_per_mtok: float
    price_completion_per_mtok: float
    tokens_spent: int = 0
    cost_spent_usd: float = 0.0
    calls: int = 0
    book: LLMBudgetBook | None = None  # the account's budget in the ledger; None: this repair only
    account: str = ""
    run: str = ""

    def __post_init__(self) -> None:
        if self.max_tokens <= 0 or self.max_cost_usd <= 0:
            raise ValueError("a budget needs positive token and money limits")
        if self.price_prompt_per_mtok < 0 or self.price_completion_per_mtok < 0:
            raise ValueError("prices cannot be negative")

    @classmethod
    def from_settings(
        cls,
        settings: AgentSettings,
        book: LLMBudgetBook | None = None,
        account: str = "",
        run: str = "",
    ) -> Budget:
        """A fresh budget with the configured limits and prices, drawing on `book` when given."""
        s = settings
        if book is not None:
            book.open_account(account, s.account_max_tokens, s.account_max_cost_usd)
            book.settle_abandoned(account)  # calls of repairs that were killed before settling
        return cls(
            max_tokens=s.max_tokens,
            max_cost_usd=s.max_cost_usd,
            price_prompt_per_mtok=s.price_prompt_per_mtok,
            price_completion_per_mtok=s.price_completion_per_mtok,
            book=book,
            account=account,
            run=run,
        )

    def cost_of(self, usage: Usage) -> float:
        """Money a response cost at the configured prices."""
        return (
            usage.prompt_tokens * self.price_prompt_per_mtok
            + usage.completion_tokens * self.price_completion_per_mtok
        ) / 1_000_000

    @property
    def tokens_left(self) -> int:
        return max(0, self.max_tokens - self.tokens_spent)

    @property
    def exhausted(self) -> bool:
        return self.tokens_spent >= self.max_tokens or self.cost_spent_usd >= self.max_cost_usd

    def reserve(self, role: str, prompt_tokens: int, wanted: int, least: int) -> Reservation:
        """Hold the most a call may cost: up to `wanted` answer tokens and at least `least`.

        Raises OutOfMoneyError when neither this repair nor the account can afford `least`. It
        names the role and what is left. Nothing is sent then."""
        tokens_left = self.max_tokens - self.tokens_spent
        money_left = self.max_cost_usd - self.cost_spent_usd
        if self.book is not None:
            balance = self.book.balance(self.account)
            tokens_left = min(tokens_left, balance.tokens_left)
            money_left = min(money_left, balance.usd_left)
        answer_tokens = min(wanted, tokens_left - prompt_tokens)
        if self.price_completion_per_mtok > 0:
            money_for_answer = money_left - prompt_tokens * self.price_prompt_per_mtok / 1_000_000
            answer_tokens = min(
                answer_tokens,
                math.floor(money_for_answer * 1_000_000 / self.price_completion_per_mtok),
            )
        if answer_tokens < least:
            logger.warning(
                "budget refused %s: an answer of at least %d tokens is not affordable "
                "(left: %d tokens, $%.4f)",
                role,
                least,
                max(tokens_left, 0),
                max(money_left, 0.0),
            )
            raise OutOfMoneyError(
                self._message(
                    f"cannot afford the next step ({role}: a prompt of up to "
                    f"{prompt_tokens} tokens "
                    f"and an answer of at least {least}; left: {max(tokens_left, 0)} tokens, "
                    f"${max(money_left, 0.0):.4f})"
                )
            )
        held = Reservation(
            role=role,
            prompt_tokens=prompt_tokens,
            max_tokens=answer_tokens,
            cost_usd=self.cost_of(
                Usage(prompt_tokens=prompt_tokens, completion_tokens=answer_tokens)
            ),
        )
        if self.book is not None:  # atomic in the ledger: a concurrent repair may have taken it
            held.book_id = self.book.reserve(
                self.account, self.run, role, held.tokens, held.cost_usd
            )
        return held

    def settle(self, held: Reservation, usage: Usage, model: str = "") -> None:
        """Debit what a call cost (before its answer is used); raise OutOfMoneyError past a
        limit."""
        self.calls += 1
        self.tokens_spent += usage.total_tokens
        self.cost_spent_usd += self.cost_of(usage)
        if self.book is not None and held.book_id is not None:
            self.book.settle(
                held.book_id,
                usage.prompt_tokens,
                usage.completion_tokens,
                self.cost_of(usage),
                model,
            )
        if self.tokens_spent > self.max_tokens or self.cost_spent_usd > self.max_cost_usd:
            logger.warning(
                "budget exceeded after %s: %d tokens, $%.4f spent",
                held.role,
                self.tokens_spent,
                self.cost_spent_usd,
            )
            raise OutOfMoneyError(self._message("budget exceeded"))

    def release(self, held: Reservation, why: str) -> None:
        """Give a reservation back: the call failed without an answer to pay for."""
        if self.book is not None and held.book_id is not None:
            self.book.release(held.book_id, why)

    def record_free(self, role: str, model: str) -> None:
        """Book a call that cost nothing (the offline rules), so the ledger counts every answer."""
        self.calls += 1
        if self.book is not None:
            book_id = self.book.reserve(self.account, self.run, role, 0, 0.0)
            self.book.settle(book_id, 0, 0, 0.0, model)

    def summary(self) -> dict[str, Any]:
        """Spent and limits, for artifacts and the version metadata; the account's balance too."""
        found: dict[str, Any] = {
            "calls": self.calls,
            "tokens_spent": self.tokens_spent,
            "max_tokens": self.max_tokens,
            "cost_spent_usd": round(self.cost_spent_usd, 6),
            "max_cost_usd": self.max_cost_usd,
        }
        if self.book is not None:
            found["account"] = self.account
            found["account_balance"] = self.book.balance(self.account).as_dict()
        return found

    def _message(self, what: str) -> str:
        return (
            f"out of money: {what} (this repair: tokens {self.tokens_spent}/{self.max_tokens}, "
            f"cost ${self.cost_spent_usd:.4f}/${self.max_cost_usd:.4f})"
        )
