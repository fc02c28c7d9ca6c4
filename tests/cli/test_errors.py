"""One error path for the CLI: every expected failure is one line on stderr naming the problem, a
non-zero exit, no traceback (unless --debug), and nothing written to OOMRL_HOME (ledger, store,
workspace, versions, run folders are hashed before and after)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import closed_port, invoke, refused


# -- settings --------------------------------------------------------------------------------------
# Alike tests/test_config.py's refusals: there get_settings() raises; here the CLI prints one line.
@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        (
            "OOMRL_KILL_THRESHOLD",
            "abc",
            "OOMRL_KILL_THRESHOLD='abc': Input should be a valid number",
        ),
        ("OOMRL_INITIAL_CASH", "nan", "OOMRL_INITIAL_CASH='nan': Input should be a finite number"),
        ("OOMRL_LEDGER_URL", "garbage", "OOMRL_LEDGER_URL='garbage': not a database URL"),
        (
            "OOMRL_LEDGER_URL",
            "postgresql+asyncpg://x@127.0.0.1/x",
            "asyncpg is an async driver; name a synchronous",
        ),
        ("OOMRL_ACCOUNT", "x" * 65, "OOMRL_ACCOUNT='xxxx"),
        ("OOMRL_ACCOUNT", "", "OOMRL_ACCOUNT='': account name must not be empty"),
        (
            "OOMRL_CONFIG",
            "/no/such/oomrl.toml",
            "OOMRL_CONFIG names /no/such/oomrl.toml, which does not exist",
        ),
        ("OOMRL_LLM_MODEL", "m" * 129, "OOMRL_LLM_MODEL='mmm"),
        ("OOMRL_MARKET_RULES", "garbage", "OOMRL_MARKET_RULES is not valid JSON"),
        (
            "OOMRL_MARKET_RULES",
            '{"cn": {"lot": 1}}',
            "OOMRL_MARKET_RULES={'cn': {'lot': 1}}: cn: lot: Extra inputs",
        ),
        (
            "OOMRL_INITIAL_CASH",
            "1e17",
            "OOMRL_INITIAL_CASH='1e17': Input should be less than or equal to 1000000000000",
        ),
        (
            "OOMRL_CONFIG",
            "/dev/zero",
            "config file /dev/zero is not a regular file",
        ),  # it would be read for ever
    ],
)
def test_bad_settings_are_named(
    home: Path, unchanged: None, variable: str, value: str, fragment: str
) -> None:
    for command in (
        ["rebalance", "--as-of", "2024-07-02"],
        ["account", "show"],
        ["ingest", "--universe", "600519"],
    ):
        refused(invoke(*command, env={variable: value}), 1, fragment)


def test_a_home_that_is_a_file_is_named(home: Path, unchanged: None) -> None:
    not_a_folder = home / "ledger.db"
    for command in (
        ["rebalance", "--as-of", "2024-07-02"],
        ["ingest", "--universe", "600519"],
        ["versions", "list"],
    ):
        refused(
            invoke(*command, env={"OOMRL_HOME": str(not_a_folder)}),
            1,
            "error: invalid setting: OOMRL_HOME=",
            ": is a file, not a folder",
        )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--universe", ""], "--universe '' names no symbols"),
        (["--universe", " , ,"], "--universe ' , ,' names no symbols"),
        (["--universe", "600519", "--end", "abc"], "--end 'abc' is not a date (YYYY-MM-DD)"),
        (["--universe", "600519", "--start", "2024-02-30"], "--start '2024-02-30' is not a date"),
        (
            ["--universe", "600519", "--start", "2024-07-10", "--end", "2024-07-01"],
            "start 2024-07-10 is after end",
        ),
    ],
)
@pytest.mark.slow
def test_ingest_arguments_are_checked_before_the_store_is_touched(
    home: Path, unchanged: None, args: list[str], fragment: str
) -> None:
    refused(invoke("ingest", *args), 1, fragment)


def test_a_ledger_url_whose_driver_is_missing_is_named(home: Path, unchanged: None) -> None:
    if importlib.util.find_spec("pymssql") is not None:
        pytest.skip("pymssql is installed here")
    refused(
        invoke("account", "show", env={"OOMRL_LEDGER_URL": "mssql+pymssql://x@127.0.0.1/x"}),
        1,
        "OOMRL_LEDGER_URL='mssql+pymssql://x@127.0.0.1/x': its database driver is not installed",
    )


def test_invalid_config_file_is_named(home: Path, unchanged: None, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("kill_threshold = = 0.2\n")
    refused(
        invoke("rebalance", env={"OOMRL_CONFIG": str(bad)}),
        1,
        f"config file {bad} is not valid TOML",
    )


def test_unreachable_ledger_is_named(home: Path, unchanged: None) -> None:
    url = f"postgresql://oomrl@127.0.0.1:{closed_port()}/oomrl"
    for command in (["rebalance", "--as-of", "2024-07-02"], ["account", "show"]):
        out = refused(
            invoke(*command, env={"OOMRL_LEDGER_URL": url}),
            1,
            "cannot use the database",
            "check OOMRL_LEDGER_URL",
        )
        assert "Connection refused" in out or "connection" in out.lower()


@pytest.mark.slow
def test_debug_shows_the_traceback(home: Path) -> None:
    result = invoke("--debug", "rebalance", env={"OOMRL_KILL_THRESHOLD": "abc"})
    assert result.exit_code == 1 and type(result.exception).__name__ == "SettingsError"
    done = subprocess.run(
        [sys.executable, "-m", "orchestration", "--debug", "account", "show"],
        capture_output=True,
        text=True,
        env={**os.environ, "OOMRL_KILL_THRESHOLD": "abc"},
        check=False,
    )
    assert (
        done.returncode == 1
        and "Traceback" in done.stderr
        and "OOMRL_KILL_THRESHOLD" in done.stderr
    )
    plain = subprocess.run(
        [sys.executable, "-m", "orchestration", "account", "show"],
        capture_output=True,
        text=True,
        env={**os.environ, "OOMRL_KILL_THRESHOLD": "abc"},
        check=False,
    )
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert plain.stderr.startswith("error: invalid setting: OOMRL_KILL_THRESHOLD='abc'")
    assert plain.stdout == ""


def test_a_defect_says_so_without_a_traceback(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from oomrl.repair import trading

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("nav")

    monkeypatch.setattr(trading, "run_rebalance", broken)
    refused(
        invoke("rebalance", "--as-of", "2024-07-02"),
        1,
        "unexpected KeyError: 'nav'",
        "run again with --debug",
    )


# -- names -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["rebalance"],
        ["account", "show"],
        ["account", "resume", "--confirm"],
        ["versions", "list"],
        ["report"],
        ["diagnose", "--as-of", "2024-07-02"],
    ],
)
@pytest.mark.parametrize(
    ("account", "fragment"),
    [
        ("", "must not be empty"),
        ("a" * 65, "65 characters; at most 64"),
        ("../x", "may only use letters"),
    ],
)
def test_account_names_are_checked_at_the_door(
    home: Path, unchanged: None, command: list[str], account: str, fragment: str
) -> None:
    refused(invoke(*command, "--account", account), 2, "Invalid value for '--account'", fragment)


def test_a_64_character_account_fits_the_ledger(home: Path, postgres_url: str | None) -> None:
    """The longest name every door accepts fits the ledger's account column (on PostgreSQL too)."""
    longest = "a" * 64
    env = {}
    if postgres_url:
        import sqlalchemy as sa

        schema = f"cli_{os.getpid()}"
        with sa.create_engine(postgres_url).begin() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {schema}"))
        env["OOMRL_LEDGER_URL"] = f"{postgres_url}?options=-csearch_path%3D{schema}"
    try:
        ok = invoke("rebalance", "--account", longest, "--as-of", "2024-07-02", env=env)
        assert ok.exit_code == 0, ok.output
        refused(
            invoke("rebalance", "--account", longest + "a", "--as-of", "2024-07-02", env=env),
            2,
            "at most 64",
        )
        assert invoke("account", "show", "--account", longest, env=env).exit_code == 0
        if postgres_url:  # the rows really went to PostgreSQL
            with sa.create_engine(postgres_url).connect() as conn:
                assert (
                    conn.execute(sa.text(f"SELECT account FROM {schema}.accounts")).scalar()
                    == longest
                )
    finally:
        if postgres_url:
            with sa.create_engine(postgres_url).begin() as conn:
                conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))


def test_dates_and_choices_are_checked(home: Path, unchanged: None) -> None:
    refused(invoke("rebalance", "--as-of", "2024-02-30"), 1, "--as-of '2024-02-30' is not a date")
    refused(
        invoke("replay", "--strategy", "daily_momentum", "--start", "July", "--end", "2024-08-01"),
        1,
        "--start 'July' is not a date",
    )
    refused(
        invoke("replay", "--strategy", "", "--start", "2024-07-01", "--end", "2024-08-01"),
        2,
        "Invalid value for '--strategy'",
        "strategy name must not be empty",
    )
    refused(invoke("versions", "activate", "v1", "--strategy", "x" * 65), 2, "at most 64")
    refused(invoke("demo", "--strategy", "Daily-Momentum"), 2, "may only use lower-case letters")
    refused(
        invoke("report", "--account", "paper", "--benchmark", "gross"), 2, "'gross' is not one of"
    )


def test_a_reader_that_goes_away_is_not_an_error_line() -> None:
    """`oomrl ... | head`: the pipe closes under the command; it stops quietly (no `error: Broken
    pipe`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orchestration", "version"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 1 and done.stderr == ""


def test_metrics_and_report_options_are_checked(
    home: Path, unchanged: None, tmp_path: Path
) -> None:
    returns = tmp_path / "r.csv"
    returns.write_text("date,return\n2024-01-02,0.01\n2024-01-03,-0.01\n2024-01-04,0.02\n")
    for rf in ("nan", "inf", "-inf"):
        # No report folder full of NaN
        refused(
            invoke("report", "--returns", str(returns), "--rf", rf),
            2,
            "Invalid value for '--rf'",
            f"must be a finite annual rate, got {float(rf)}",
        )
        refused(
            invoke("metrics", "--returns", str(returns), "--benchmark", str(returns), "--rf", rf),
            2,
            "must be a finite annual rate",
        )
    refused(
        invoke(
            "metrics", "--returns", str(returns), "--benchmark", str(returns), "--start", "July"
        ),
        1,
        "--start 'July' is not a date (YYYY-MM-DD)",
    )
