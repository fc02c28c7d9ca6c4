"""A refusal ends its run with one logged line: no ERROR, no traceback; a defect keeps its
traceback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from oomrl.errors import AccountHaltedError, SourceUnavailableError
from oomrl.repair.loop import RepairNotPromoted, RepairOutcome
from tasks.expected_ends import ENGINE_EXIT, ExpectedEnds, quiet_expected_ends


def _record(
    message: str, exc: BaseException | None, name: str = "prefect.task_runs"
) -> logging.LogRecord:
    return logging.LogRecord(
        name,
        logging.ERROR,
        __file__,
        1,
        message,
        None,
        (type(exc), exc, None) if exc is not None else None,
    )


class Collect(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


REFUSED = RepairNotPromoted(
    RepairOutcome(status="failed", step="logic-genesis", reason="diff.scope", run_dir="")
)


def test_a_refusal_becomes_one_warning_line_and_the_engine_repeat_goes() -> None:
    refusal = _record(
        "Task run failed with exception: AccountHaltedError('paper is HALTED')",
        AccountHaltedError("paper is HALTED"),
    )
    assert ExpectedEnds().filter(refusal)
    assert (refusal.levelname, refusal.exc_info) == ("WARNING", None)
    assert not ExpectedEnds().filter(_record(ENGINE_EXIT, REFUSED, "prefect.flow_runs"))


@pytest.mark.parametrize(
    "exc", [SourceUnavailableError("akshare unreachable"), ValueError("a defect"), None]
)
def test_what_is_not_a_final_answer_keeps_its_level_and_traceback(
    exc: BaseException | None,
) -> None:
    record = _record(ENGINE_EXIT, exc, "prefect.flow_runs")
    assert ExpectedEnds().filter(record)
    assert record.levelname == "ERROR" and record.exc_info == (
        (type(exc), exc, None) if exc else None
    )


@pytest.mark.usefixtures("prefect_harness")
def test_a_flow_that_ends_failed_on_purpose_logs_no_error_as_a_worker_runs_it() -> None:
    """The worker's path: run_flow with the run's logger as error_logger, which re-raises the run's
    own Failed state and logs "Engine execution exited with unexpected exception" at ERROR."""
    from prefect import flow
    from prefect.flow_engine import run_flow
    from prefect.states import Failed

    @flow(name="ends-refused", retries=0)
    def ends_refused() -> object:
        return Failed(name="Patch rejected", message="logic-genesis: diff.scope", data=REFUSED)

    quiet_expected_ends()
    handler = Collect()  # handed what the run's log handlers (console, API) are handed
    records = handler.records
    # Prefect's run loggers do not propagate to caplog
    logger = logging.getLogger("prefect.flow_runs")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # the suite runs Prefect at WARNING (tests/conftest.py)
    try:
        with pytest.raises(RepairNotPromoted):  # the worker's process sees it; its log must not
            run_flow(ends_refused, error_logger=logger)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert any("Finished in state Patch rejected" in r.getMessage() for r in records), [
        r.getMessage() for r in records
    ]
    errors = [r.getMessage() for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == []


def test_every_flow_module_configures_its_logging_when_imported() -> None:
    """A flow module without the call would log a refusal as a traceback in its runs."""
    import ast

    flows = Path(__file__).resolve().parents[2] / "flows"
    for path in sorted(flows.glob("*.py")):
        tree = ast.parse(path.read_text())
        defines_a_flow = any(
            isinstance(node, ast.FunctionDef)
            and any("flow" in ast.unparse(d) for d in node.decorator_list)
            for node in tree.body
        )
        calls = {
            ast.unparse(node.value.func)
            for node in tree.body
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        }
        assert not defines_a_flow or "configure_flow_logging" in calls, path.name
