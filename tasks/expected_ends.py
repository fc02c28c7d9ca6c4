"""Expected ends are not errors: a run that ends on a refusal logs one line, never a traceback.

A repair the gate rejects ends Failed as `Patch rejected` on purpose; its data is
RepairNotPromoted. A rebalance of a halted account is refused on purpose (AccountHaltedError).
Prefect logs either at ERROR with a traceback. The task engine says "Task run failed with
exception ...". The worker's flow engine says "Engine execution exited with unexpected exception".
It raises that again from the run's own Failed state.

This filter sits on Prefect's run loggers. It turns those records into one WARNING line when the
exception is a final answer. A final answer is an OomrlError that is not transient. Or it is
FailedRun, Prefect's wrapper for a Failed state a flow returned on purpose. The engine's
"unexpected exception" record repeats what the run's state already names, so it is dropped.
Anything else keeps its traceback: a defect, or a transient failure that ran out of retries.
"""

from __future__ import annotations

import logging

from oomrl import logs
from oomrl.errors import OomrlError

RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
ENGINE_EXIT = "Engine execution exited with unexpected exception"


def is_expected(exc: BaseException | None) -> bool:
    """A final answer on purpose: a refusal, bad input, or a Failed state a flow returned."""
    from prefect.exceptions import FailedRun

    if isinstance(exc, OomrlError):
        return not exc.transient
    return isinstance(exc, FailedRun)


class ExpectedEnds(logging.Filter):
    """Drops the engine's repeat of an expected end.

    It makes other records of one a traceback-free warning.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not is_expected(exc):
            return True
        if record.getMessage() == ENGINE_EXIT:
            return False
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


FILTER = ExpectedEnds()


def quiet_expected_ends() -> None:
    """Install the filter on Prefect's run loggers (once per process; flows call it when
    imported)."""
    for name in RUN_LOGGERS:
        logger = logging.getLogger(name)
        if FILTER not in logger.filters:
            logger.addFilter(FILTER)


def configure_flow_logging() -> None:
    """What each flow module does when imported: expected ends quiet, and oomrl's records handed
    to Prefect's run loggers (prefect.yaml) rather than a handler of their own."""
    quiet_expected_ends()
    logs.configure(handler=False)
