"""Names every entry point accepts (accounts, alert ids): one length limit and alphabet per kind.

The limits are the ledger's column widths: accounts String(64), alerts.alert_id String(128). The
CLI, the webhook and a settings file accept the same names. So each always fits the ledger on any
database.
"""

from __future__ import annotations

import re

from oomrl.errors import InvalidNameError

ACCOUNT_MAX = 64
ALERT_ID_MAX = 128
STRATEGY_MAX = 64  # strategy_versions.name and rebalances.strategy.
# Accounts end up in file names (reports), Prefect resource ids and SQL.
# So: letters, digits, . _ - only.
ACCOUNT_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._\-]{{0,{ACCOUNT_MAX - 1}}}$"
ALERT_ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:\-]{{0,{ALERT_ID_MAX - 1}}}$"
# A strategy is a module of the strategies package: a Python identifier in lower case.
STRATEGY_PATTERN = rf"^[a-z_][a-z0-9_]{{0,{STRATEGY_MAX - 1}}}$"


def _check(
    value: str, kind: str, pattern: str, limit: int, alphabet: str, start: str = "a letter or digit"
) -> str:
    if not value:
        raise InvalidNameError(f"{kind} must not be empty")
    if len(value) > limit:
        raise InvalidNameError(f"{kind} is {len(value)} characters; at most {limit} are allowed")
    if not re.fullmatch(pattern, value):
        raise InvalidNameError(
            f"{kind} {value[:80]!r} may only use {alphabet}, starting with {start}"
        )
    return value


def check_account(value: str, kind: str = "account name") -> str:
    """`value` when it is a valid account name, else InvalidNameError saying what is wrong."""
    return _check(value, kind, ACCOUNT_PATTERN, ACCOUNT_MAX, "letters, digits, '.', '_' and '-'")


def check_alert_id(value: str, kind: str = "alert id") -> str:
    """`value` when it is a valid alert id, else InvalidNameError saying what is wrong."""
    return _check(
        value, kind, ALERT_ID_PATTERN, ALERT_ID_MAX, "letters, digits, '.', '_', ':' and '-'"
    )


def check_strategy(value: str, kind: str = "strategy name") -> str:
    """`value` when it can name a strategy module, else InvalidNameError saying what is wrong."""
    return _check(
        value,
        kind,
        STRATEGY_PATTERN,
        STRATEGY_MAX,
        "lower-case letters, digits and '_'",
        "a letter or '_'",
    )
