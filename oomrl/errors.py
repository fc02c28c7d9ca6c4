"""Typed errors shared across oomrl, and the one-line message a user sees for each expected
failure."""

from __future__ import annotations

import errno
import re
import sys


class OomrlError(Exception):
    """Base class: an error whose message is fit to show a user as is."""

    # A final answer (bad data, invalid input, a refusal) unless a subclass says it may pass by
    # itself.
    transient: bool = False


class DataValidationError(OomrlError):
    """Market data failed validation and must not be traded on or stored."""


class SourceUnavailableError(OomrlError):
    """A live data source could not be reached."""

    transient = True


class AccountHaltedError(OomrlError):
    """The account is in the absorbing HALTED state; a person must resume it."""


class OutOfMoneyError(OomrlError):
    """The agent's compute budget (tokens or money) is spent."""


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _os_message(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    if exc.errno in _DISK_FULL:
        return f"disk full: cannot write{where} ({exc.strerror}); free some space and run again"
    if exc.errno in _NOT_WRITABLE:
        return (
            f"cannot write{where}: {exc.strerror} (is OOMRL_HOME on a read-only or foreign-owned "
            "file system?)"
        )
    if isinstance(exc, FileNotFoundError):
        if where or not exc.strerror:
            return f"no such file or folder:{where}"
        hint = " (set TMPDIR to a writable folder)" if "temporary directory" in exc.strerror else ""
        return (
            f"{exc.strerror}{hint}"  # tempfile's: no file to name, its reason says what is missing
        )
    return (
        f"{exc.strerror or type(exc).__name__}:{where}"
        if exc.strerror
        else f"{type(exc).__name__}: {exc}"
    )


def _database_message(exc: BaseException) -> str | None:
    """SQLAlchemy errors (ledger, delivery store): which database, and what went wrong, in one
    line."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None or not isinstance(exc, sa_exc.SQLAlchemyError):
        return None
    original = getattr(exc, "orig", None)
    detail = str(original if original is not None else exc).strip().splitlines()[0]
    lowered = detail.lower()
    if "disk is full" in lowered or "no space left" in lowered:
        return f"disk full: the database could not write ({detail}); free some space and run again"
    if "readonly database" in lowered or "read-only" in lowered:
        return f"the database is read-only ({detail}): check OOMRL_HOME or OOMRL_LEDGER_URL"
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
        return (
            f"cannot use the database ({detail}): check OOMRL_LEDGER_URL and that the server is up"
        )
    if isinstance(exc, sa_exc.DataError):
        return f"a value does not fit the database ({detail})"
    return f"database error: {detail}"


def user_message(exc: BaseException) -> str | None:
    """The one line to show for an expected failure, or None for a defect (which needs a
    traceback)."""
    if isinstance(exc, OomrlError):
        return str(exc)
    database = _database_message(exc)
    if database is not None:
        return _hide_passwords(database)
    if isinstance(exc, OSError):
        return _os_message(exc)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        return f"invalid {exc.title}: {validation_problems(exc)}"
    if isinstance(exc, ValueError | UnicodeError):
        return str(exc) or type(exc).__name__
    return None


def validation_problems(exc: Exception, most: int = 5, with_input: bool = False) -> str:
    """A pydantic ValidationError in one line, `field: what is wrong` (and `(got value)` with
    `with_input`: never for settings, whose values may be secrets); pydantic's own text spans lines
    and ends with a documentation URL."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return " ".join(str(exc).split())
    problems = []
    for error in errors()[:most]:
        where = ".".join(str(part) for part in error["loc"]) or "value"
        shown = with_input and "input" in error and not isinstance(error["input"], dict)
        given = f" (got {error['input']!r})" if shown else ""
        problems.append(f"{where}: {error['msg']}{given}")
    return "; ".join(problems)


def _hide_passwords(text: str) -> str:
    """Drop the password of any URL in a message (drivers echo connection strings)."""
    return re.sub(r"(\w+://[^:/@\s]+:)[^@\s]+@", r"\1***@", text)
