"""CLI command groups, one module per area (each exposes `register(app)`), and what they share.

Shared here:
- the fixed choices as enums, so help lists them and typos are usage errors.
- the `--account` option, validated like every other door: non-empty, at most 64 characters.
- a progress bar for long steps.
Nothing heavy is imported at module level.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, overload

import typer

if TYPE_CHECKING:
    from oomrl.settings import OomrlSettings


# Alike in shape to each other and to gate_cmds.py's enums.
# Each lists one option's choices, which typer shows in help.
# A table of them would hide the choices from both.
class Lock(enum.StrEnum):
    """RO-Lock backends of the gate (`namespace` is bwrap; `hash-only` must be asked for by
    name)."""

    bwrap = "bwrap"
    docker = "docker"
    namespace = "namespace"
    hash_only = "hash-only"


class Provider(enum.StrEnum):
    """Where the agent's answers come from."""

    offline = "offline"
    openai = "openai"
    replay = "replay"


class Benchmark(enum.StrEnum):
    """Which CSI 300 series a report compares against."""

    price = "price"
    total_return = "total_return"


class Market(enum.StrEnum):
    """Which market's symbols, benchmark and trading rules."""

    cn = "cn"
    us = "us"
    hk = "hk"


class RepairOn(enum.StrEnum):
    """Which new alert starts a repair in the demo."""

    friction = "friction"
    critical = "critical"
    warning = "warning"


@overload
def parse_day(text: str, what: str) -> date: ...
@overload
def parse_day(text: None, what: str) -> None: ...
def parse_day(text: str | None, what: str) -> date | None:
    """A YYYY-MM-DD option as a date; None stays None.

    Otherwise a clear error naming the option.
    """
    from oomrl.errors import OomrlError

    if text is None:
        return None
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise OomrlError(f"{what} {text!r} is not a date (YYYY-MM-DD)") from None


def _checked(value: str | None, check: Callable[[str], str]) -> str | None:
    from oomrl.errors import InvalidNameError

    if value is None:
        return None
    try:
        return check(value)
    except InvalidNameError as exc:
        raise typer.BadParameter(str(exc)) from None


def valid_account(value: str | None) -> str | None:
    """Option callback: an account name every door accepts (non-empty, at most 64 characters)."""
    from oomrl.names import check_account

    return _checked(value, check_account)


def valid_strategy(value: str | None) -> str | None:
    """Option callback: a name that can be a strategy module (non-empty, at most 64 characters)."""
    from oomrl.names import check_strategy

    return _checked(value, check_strategy)


def finite_seconds(value: float | None) -> float | None:
    """Option callback: a finite number of seconds (`--wait inf` or `nan` would wait for ever)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number of seconds, got {value}")
    return value


AccountOption = Annotated[
    str | None,
    typer.Option(
        "--account",
        metavar="NAME",
        callback=valid_account,
        help="Ledger account (default: OOMRL_ACCOUNT, else paper).",
    ),
]
StrategyOption = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        metavar="NAME",
        callback=valid_strategy,
        help="Strategy name (default: the one the account trades).",
    ),
]


def account_or_default(account: str | None, settings: OomrlSettings) -> str:
    """The account a command acts on: the option when given, else the configured one."""
    return settings.ledger.account if account is None else account


@contextmanager
def progress(description: str, total: int | None = None, console: Any = None) -> Iterator[Any]:
    """A transient rich progress bar (on stderr by default); yields `advance(done, total, label)`.

    Drawn only on a terminal, so piped output and logs stay clean."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total=None, label="": None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(
        *columns, console=console, transient=True, redirect_stdout=False, redirect_stderr=False
    ) as bar:
        task = bar.add_task(description, total=total)

        def advance(done: int, total: int | None = None, label: str = "") -> None:
            bar.update(
                task, completed=done, total=total, description=f"{description} {label}".rstrip()
            )

        yield advance


__all__ = [
    "AccountOption",
    "Benchmark",
    "Lock",
    "Market",
    "Provider",
    "RepairOn",
    "StrategyOption",
    "account_or_default",
    "finite_seconds",
    "parse_day",
    "progress",
    "valid_account",
    "valid_strategy",
]
