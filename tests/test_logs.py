"""One logging configuration (oomrl/logs.py), and the domain's decisions in the logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from oomrl import logs
from oomrl.agent.budget import Budget
from oomrl.data.ingest import ingest
from oomrl.data.sources.csv import CsvSource
from oomrl.data.store import MarketStore
from oomrl.errors import OutOfMoneyError
from oomrl.portfolio.killswitch import AccountStatus, KillSwitch
from tests.conftest import FIXTURES


@pytest.fixture
def restored() -> Iterator[None]:
    """configure() changes process-wide loggers: put them back as they were."""
    saved = {
        name: (logging.getLogger(name).level, logging.getLogger(name).handlers[:])
        for name in logs.LOGGERS
    }
    yield
    for name, (level, handlers) in saved.items():
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.handlers[:] = handlers


def ours(name: str) -> list[logging.Handler]:
    return [h for h in logging.getLogger(name).handlers if isinstance(h, logs.StderrHandler)]


@pytest.mark.usefixtures("restored")
def test_configure_twice_keeps_one_handler_and_the_last_level() -> None:
    logs.configure()
    logs.configure("debug")
    for name in logs.LOGGERS:
        assert len(ours(name)) == 1
        assert logging.getLogger(name).level == logging.DEBUG
    logs.configure("WARNING", handler=False)  # the flows' call: the level only
    assert all(len(ours(name)) == 1 for name in logs.LOGGERS)
    assert logging.getLogger("oomrl").level == logging.WARNING
    with pytest.raises(ValueError, match="unknown log level"):
        logs.configure("loud")


@pytest.mark.usefixtures("restored")
def test_module_records_reach_stderr_named_after_their_module(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("INFO")
    logging.getLogger("oomrl.data.ingest").info("stored %d rows", 4)
    logging.getLogger("guardrails.gate").warning("%s patch rejected", "code-patch")
    logging.getLogger("oomrl.quiet").debug("not shown at INFO")
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 2)[2] for line in err] == [
        "INFO oomrl.data.ingest: stored 4 rows",
        "WARNING guardrails.gate: code-patch patch rejected",
    ]


def test_a_kill_switch_trip_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    switch = KillSwitch(0.20)
    with caplog.at_level(logging.INFO, logger="oomrl"):
        assert switch.next_status(AccountStatus.ACTIVE, 0.10) is AccountStatus.ACTIVE
        assert switch.next_status(AccountStatus.ACTIVE, 0.25) is AccountStatus.HALTED
        assert switch.next_status(AccountStatus.HALTED, 0.30) is AccountStatus.HALTED
    [record] = [r for r in caplog.records if r.name == "oomrl.portfolio.killswitch"]
    assert record.levelno == logging.WARNING
    assert "kill switch tripped: principal loss 25.00% reached the threshold 20%" in (
        record.getMessage()
    )


def test_an_ingest_logs_what_it_stored_and_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = CsvSource(FIXTURES / "data" / "csv_mapped")
    with caplog.at_level(logging.INFO, logger="oomrl"):
        report = ingest(source, "600519", None, None, MarketStore(tmp_path))
    lines = [r.getMessage() for r in caplog.records if r.name == "oomrl.data.ingest"]
    assert any(f"ingest {report.ingest_id} of csv" in line for line in lines)
    assert any("4 bar rows stored of 6 fetched" in line for line in lines)
    assert any("quarantined 2 bar rows" in line for line in lines)


def test_a_budget_refusal_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    budget = Budget(
        max_tokens=100, max_cost_usd=1.0, price_prompt_per_mtok=0, price_completion_per_mtok=0
    )
    with caplog.at_level(logging.INFO, logger="oomrl"), pytest.raises(OutOfMoneyError):
        budget.reserve("coder", prompt_tokens=90, wanted=50, least=20)
    [record] = [r for r in caplog.records if r.name == "oomrl.agent.budget"]
    assert record.levelno == logging.WARNING
    assert "budget refused coder" in record.getMessage()


def test_every_deployment_sends_the_module_loggers_to_its_run_logs() -> None:
    """prefect.yaml names oomrl and guardrails as Prefect's extra loggers for every flow run."""
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "prefect.yaml").read_text())
    for deployment in config["deployments"]:
        env = deployment["work_pool"]["job_variables"]["env"]
        extra = env["PREFECT_LOGGING_EXTRA_LOGGERS"].split(",")
        assert set(logs.LOGGERS) <= set(extra), deployment["name"]
