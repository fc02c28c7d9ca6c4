"""Typed errors shared across oomrl, and the one-line message a user sees for each failure."""

from __future__ import annotations

import errno
import re
import sys


class OomrlError(Exception):
    """Base class: an error whose message is fit to show a user as is."""

    # A final answer (bad data, invalid input, a refusal).
    # A subclass may say it may pass by itself.
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


# Settings


class SettingsError(OomrlError):
    """A setting (environment variable or config file key) is missing, malformed or out of range."""


class WebhookConfigError(OomrlError):
    """The webhook cannot start with this configuration."""


# Names and report links


class InvalidNameError(OomrlError, ValueError):
    """A name is empty, too long or uses characters it may not."""


class ReportLinkError(ValueError):
    """A path that is not a report file (bad folder or file name)."""


# Market data and the store


class MissingBenchmarkError(DataValidationError):
    """The source has no CSI 300 levels for the range: nothing can be measured against it."""


class StoreDamagedError(OomrlError):
    """The store's catalog is unreadable or names a file that is gone.

    That is outside interference, not a crash.
    """


class StoreBusyError(OomrlError):
    """Another process is writing the market store and did not finish within the wait."""


class StoreWriteError(OomrlError):
    """The file system refused a store write (disk full, read-only, permissions); nothing was
    committed."""


# The portfolio


class LedgerConflictError(OomrlError):
    """The account changed between planning and committing a rebalance (another run got there
    first)."""

    transient = True  # planning again on the new revision succeeds


class StrategyHostError(OomrlError):
    """The strategy host could not start, broke the protocol, died or did not answer in time."""


class StrategyFailedError(OomrlError):
    """The strategy raised an exception or returned something that is not valid weights."""


# Metrics


class MetricsInputError(DataValidationError):
    """A return or benchmark series cannot be used to compute metrics; the message says why."""


# Versions and probation


class VersionError(OomrlError):
    """A version operation failed (unknown ref, git failure, nothing to roll back to)."""


class UnknownActiveVersionError(VersionError):
    """The ledger says an account trades a commit the strategy workspace does not hold."""


class ProbationError(OomrlError):
    """A probation cannot be opened, found or decided as asked."""


# The agent


class AgentError(OomrlError):
    """The agent could not produce a usable answer."""


class LLMUnavailableError(AgentError):
    """The endpoint failed: retries exhausted on a transient error (`transient`), or a permanent
    error."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class InvalidAnswerError(AgentError):
    """The model answered, but the answer is unusable (not the JSON asked for, or too large)."""


class MalformedReplyError(AgentError):
    """The endpoint answered 200 with something that is not a chat completion.

    Examples are truncated JSON or a wrong shape. `raw` is what it sent.
    """

    def __init__(self, reason: str, raw: str) -> None:
        super().__init__(reason)
        self.reason, self.raw = reason, raw


class ProviderError(OomrlError):
    """A provider cannot be built or cannot answer (unknown name, missing transcript)."""


class BudgetBookError(OomrlError):
    """A budget operation named an account or call the ledger does not hold, or bad amounts."""


class IllegalTransitionError(OomrlError):
    """The repair tried a move its state machine does not have (a defect, never an outcome)."""


class RepairStepError(OomrlError):
    """A repair step failed; `step` names it and the message says why."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step} failed: {reason}")
        self.step, self.reason = step, reason


# The repair (RepairNotPromoted, a Failed run's data, stands beside RepairOutcome in oomrl.repair)


class InvalidInputError(OomrlError, ValueError):
    """A file or body given to the repair is unusable; the message names the problem."""


class InvalidAutopsyError(InvalidInputError):
    """The input is not a repair input the loop can act on; the message names the problem."""


class UnknownAccountError(InvalidAutopsyError):
    """The input names an account the ledger does not hold."""


class AccountOnProbationError(InvalidAutopsyError):
    """The account's challenger is on probation: one challenger per account at a time."""


class UnknownStrategyError(InvalidAutopsyError):
    """The input names a strategy module the workspace does not hold."""


class AccountBusyError(OomrlError):
    """Another repair of the account held it for longer than this one would wait."""


class TooManyRepairsError(OomrlError):
    """As many repairs as the limit allows are running already (OOMRL_REPAIR_MAX_RUNNING)."""


# The webhook


class LaunchError(OomrlError):
    """The repair could not be started (Prefect unreachable, deployment missing)."""


class SignatureError(OomrlError):
    """A delivery's signature is missing, malformed, stale or wrong."""


class InvalidAlertError(ValueError):
    """The body is not a loss alert; the message says which field is wrong."""


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
        # Tempfile's: no file to name, its reason says what is missing
        return f"{exc.strerror}{hint}"
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
    """The one line to show for an expected failure.

    None for a defect, which needs a traceback.
    """
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
    """A pydantic ValidationError in one line, `field: what is wrong`.

    With `with_input` it adds `(got value)`. That is never for settings, whose values may be
    secrets. Pydantic's own text spans lines and ends with a documentation URL.
    """
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
