"""The ledger group: the ledger's database and the account it books by default."""

from __future__ import annotations

from pydantic import Field, field_validator

from oomrl.names import check_account
from oomrl.settings.sources import Group, own_variable
from oomrl.settings.urls import check_database_url


class LedgerSettings(Group):
    """The ledger and its accounts (OOMRL_LEDGER_URL, OOMRL_ACCOUNT, ..., [oomrl.ledger])."""

    url: str | None = Field(
        None,
        json_schema_extra=own_variable("OOMRL_LEDGER_URL"),
        description="The ledger database; unset: SQLite in the home folder (SQLAlchemy URL).",
    )
    account: str = Field("paper", description="The account commands act on by default (name).")
    # The ledger keeps fen in 64-bit integers, so a trillion leaves room for every sum it books.
    initial_cash: float = Field(
        10_000_000.0, gt=0, le=1e12, description="Cash an account opens with (CNY)."
    )
    kill_threshold: float = Field(
        0.20,
        gt=0,
        le=1,
        description="Principal loss that halts the account; 1 means never (fraction of principal).",
    )

    @field_validator("account")
    @classmethod
    def _account_name(cls, value: str) -> str:
        return check_account(value)

    @field_validator("url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        return None if value is None else check_database_url(value)
