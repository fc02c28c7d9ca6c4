"""The shared retry condition repeats infrastructure failures and never a refusal or bad input."""

from typing import Any

import pytest

from oomrl.errors import AccountHaltedError, DataValidationError
from tasks.retry import unless_refused


class _State:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return 1


@pytest.mark.parametrize("error", [AccountHaltedError("halted"), DataValidationError("NaN close")])
def test_refusals_and_bad_input_are_final(error: Exception) -> None:
    assert unless_refused(None, None, _State(error)) is False


@pytest.mark.parametrize(
    "error", [OSError("disk"), ConnectionError("db gone"), RuntimeError("boom")]
)
def test_infrastructure_failures_are_retried(error: Exception) -> None:
    assert unless_refused(None, None, _State(error)) is True


def test_a_completed_state_needs_no_retry() -> None:
    assert unless_refused(None, None, _State(None)) is False


def test_transient_oomrl_errors_are_retried() -> None:
    from oomrl.errors import LedgerConflictError, SourceUnavailableError

    assert unless_refused(None, None, _State(SourceUnavailableError("akshare down"))) is True
    assert unless_refused(None, None, _State(LedgerConflictError("revision moved"))) is True
