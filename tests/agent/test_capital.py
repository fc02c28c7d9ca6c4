"""The per-account LLM budget in the ledger: reserve, settle, release, refuse; atomic under
concurrency."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from oomrl.agent.budget import Budget, Usage
from oomrl.agent.capital import LLMBudgetBook, to_nano
from oomrl.errors import BudgetBookError, OutOfMoneyError
from oomrl.portfolio.budget_tables import NANO, read_cost_of_alignment
from oomrl.portfolio.ledger import Ledger
from tests.portfolio.conftest import ledger  # noqa: F401 - the SQLite / PostgreSQL ledger fixture


def test_money_is_exact_nano_usd_rounded_up() -> None:
    assert to_nano(0.15) == 150_000_000 and to_nano(1e-10) == 1 and to_nano(0) == 0
    assert to_nano(20.0) == 20 * NANO


def test_a_call_is_reserved_then_debited_what_it_cost(ledger: Ledger) -> None:  # noqa: F811
    book = LLMBudgetBook(ledger)
    opened = book.open_account("paper", 10_000, 1.0)
    assert (opened.tokens_left, opened.usd_left) == (10_000, 1.0)
    # Opening again changes nothing
    assert book.open_account("paper", 5, 5.0).tokens_limit == 10_000
    call = book.reserve("paper", "run-1", "coder", 9_000, 0.5)
    held = book.balance("paper")
    assert (held.tokens_held, held.tokens_left, held.usd_held) == (9_000, 1_000, 0.5)
    with pytest.raises(
        OutOfMoneyError,
        match=r"account 'paper' cannot afford the next step \(critic "
        r"needs up to 2000 tokens, \$0.0100; the account has "
        r"1000 tokens",
    ):
        book.reserve("paper", "run-1", "critic", 2_000, 0.01)
    after = book.settle(call, 3_000, 1_500, 0.00135, "m")
    assert (after.tokens_spent, after.tokens_held, after.tokens_left) == (4_500, 0, 5_500)
    assert after.usd_spent == pytest.approx(0.00135)
    released = book.release(book.reserve("paper", "run-1", "critic", 2_000, 0.01), "timed out")
    assert released.tokens_left == 5_500 and released.tokens_held == 0
    journal = book.calls("paper")
    assert [(c["role"], c["status"]) for c in journal] == [
        ("coder", "settled"),
        ("critic", "released"),
    ]
    assert journal[0]["tokens_left_after"] == 5_500 and journal[1]["detail"] == "timed out"
    with pytest.raises(BudgetBookError, match="is not an open reservation"):
        book.settle(call, 1, 1, 0.0, "m")
    cost = book.cost_of_alignment("paper")
    assert cost is not None and (cost.repairs, cost.calls, cost.tokens) == (1, 1, 4_500)
    assert read_cost_of_alignment(ledger, "paper") == cost
    assert book.cost_of_alignment("nobody") is None


def test_capital_can_be_added_and_bad_requests_are_named(ledger: Ledger) -> None:  # noqa: F811
    book = LLMBudgetBook(ledger)
    with pytest.raises(BudgetBookError, match="no LLM budget to fund"):
        book.fund("ghost", tokens=1)
    with pytest.raises(BudgetBookError, match="has no LLM budget in the ledger"):
        book.reserve("ghost", "r", "critic", 1, 0.0)
    with pytest.raises(BudgetBookError, match="needs an account name"):
        book.open_account("", 1, 1.0)
    with pytest.raises(BudgetBookError, match="positive limits"):
        book.open_account("paper", 0, 1.0)
    book.open_account("paper", 100, 0.5)
    with pytest.raises(BudgetBookError, match="cannot be negative"):
        book.reserve("paper", "r", "critic", -1, 0.0)
    funded = book.fund("paper", tokens=900, usd=1.5)
    assert (funded.tokens_limit, funded.usd_limit) == (1_000, 2.0)
    assert book.fund("paper", usd=-0.5).usd_limit == 1.5


def test_a_report_on_a_ledger_without_budgets_creates_nothing(tmp_path: Path) -> None:
    import sqlalchemy as sa

    plain = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    plain.create_schema()
    assert read_cost_of_alignment(plain, "paper") is None
    assert not sa.inspect(plain.engine).has_table("llm_budgets")


def test_concurrent_repairs_never_take_more_than_the_account_holds(ledger: Ledger) -> None:  # noqa: F811
    book = LLMBudgetBook(ledger)
    book.open_account("shared", 10_000, 100.0)
    granted: list[int] = []
    refused: list[str] = []

    def repair(n: int) -> None:
        for _ in range(5):
            try:
                granted.append(book.reserve("shared", f"run-{n}", "coder", 700, 0.01))
            except OutOfMoneyError as exc:
                refused.append(str(exc))

    threads = [threading.Thread(target=repair, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 10_000 // 700 and len(refused) == 20 - len(granted)
    assert book.balance("shared").tokens_left == 10_000 - 700 * len(granted) >= 0


def test_a_repair_budget_draws_on_the_account_and_books_free_answers(ledger: Ledger) -> None:  # noqa: F811
    book = LLMBudgetBook(ledger)
    budget = Budget(
        max_tokens=50_000,
        max_cost_usd=1.0,
        price_prompt_per_mtok=1.0,
        price_completion_per_mtok=2.0,
        book=book,
        account="paper",
        run="r1",
    )
    book.open_account("paper", 5_000, 1.0)
    held = budget.reserve("coder", 1_000, 8_000, 1_000)
    assert held.max_tokens == 4_000  # the account, not this repair, is the tighter limit
    budget.settle(held, Usage(prompt_tokens=900, completion_tokens=100), "m")
    assert book.balance("paper").tokens_left == 4_000
    assert budget.summary()["account_balance"]["tokens_spent"] == 1_000
    budget.record_free("critic", "offline-rules")
    assert [c["cost_nusd"] for c in book.calls("paper")] == [to_nano((900 + 200) / 1e6), 0]
    with pytest.raises(OutOfMoneyError, match=r"cannot afford the next step \(coder"):
        budget.reserve("coder", 3_500, 8_000, 1_000)
    budget.release(budget.reserve("coder", 100, 8_000, 1_000), "endpoint down")
    assert book.balance("paper").tokens_held == 0
    with pytest.raises(ValueError, match="positive"):
        Budget(max_tokens=0, max_cost_usd=1, price_prompt_per_mtok=0, price_completion_per_mtok=0)
    with pytest.raises(ValueError, match="negative"):
        Budget(max_tokens=1, max_cost_usd=1, price_prompt_per_mtok=-1, price_completion_per_mtok=0)


def test_a_killed_repairs_reservation_is_charged_when_the_account_next_repairs(
    ledger: Ledger,  # noqa: F811
) -> None:
    book = LLMBudgetBook(ledger)
    book.open_account("paper", 10_000, 1.0)
    book.reserve("paper", "killed-run", "coder", 3_000, 0.2)  # the process died before settling
    assert book.settle_abandoned("paper", older_than_s=3600) == 0  # too recent: maybe still running
    assert book.settle_abandoned("paper", older_than_s=0) == 1
    balance = book.balance("paper")
    assert (balance.tokens_held, balance.tokens_spent, balance.usd_spent) == (0, 3_000, 0.2)
    assert book.calls("paper")[0]["status"] == "abandoned"
    cost = book.cost_of_alignment("paper")
    assert cost is not None and (cost.calls, cost.tokens) == (1, 3_000)
