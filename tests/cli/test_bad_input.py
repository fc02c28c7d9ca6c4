"""Input that used to be dropped, misread or reported as "a defect in oomrl": each is now kept, or
refused at the door with one line naming the file, the field or the setting, and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import invoke, refused, snapshot, write_json
from tests.conftest import REPO_ROOT

BARS = (
    "date,open,high,low,close,volume,amount\n"
    "2024-07-01,100,101,99,100,1000,100000\n"
    "2024-07-02,100,102,99,101,1000,101000\n"
    "2024-07-03,101,103,100,102,1000,102000\n"
    "2024-07-04,102,104,101,103,1000,103000\n"
)
INDEX = "date,close\n2024-07-01,3000\n2024-07-02,3010\n2024-07-03,3020\n2024-07-04,3030\n"


def csv_folder(root: Path, bars: str = BARS, index: str = INDEX, layout: str | None = None) -> Path:
    (root / "index").mkdir(parents=True)
    (root / "600519.csv").write_text(bars)
    (root / "index" / "000300.csv").write_text(index)
    if layout is not None:
        (root / "source.toml").write_text(layout)
    return root


def test_identical_rows_are_kept_once_and_reported(oomrl_home: Path, tmp_path: Path) -> None:
    lines = BARS.splitlines(keepends=True)
    doubled = "".join([*lines[:3], lines[2], *lines[3:]])  # 2024-07-02 twice, to the byte
    result = invoke(
        "ingest", "--source", f"csv:{csv_folder(tmp_path / 'csv', doubled)}", "--universe", "all"
    )
    assert result.exit_code == 0, result.output
    assert (
        "store now: 4 bars, 1 symbols, 2024-07-01..2024-07-04" in result.output
    )  # no session lost
    assert "quarantined: 1 rows (duplicate 1)" in result.output
    quarantine = invoke("data", "quarantine")
    assert "identical copy of another (date, symbol) row" in quarantine.output
    assert "conflicting" not in quarantine.output


def test_an_index_file_whose_every_row_is_bad_is_a_missing_benchmark(
    home: Path, unchanged: None, tmp_path: Path
) -> None:
    folder = csv_folder(tmp_path / "csv", index="date,close\n2024-07-01,abc\n2024-07-02,-1\n")
    refused(
        invoke("ingest", "--source", f"csv:{folder}", "--universe", "all"),
        1,
        "source 'csv' has no valid CSI 300 (000300) level for 2024-07-01..2024-07-04",
        "every one of its 2 rows is invalid (missing_value 1, non_positive_price 1",
        "missing benchmark",
    )


@pytest.mark.parametrize(
    ("layout", "fragment"),
    [
        (
            "columns = [1, 2]\n",
            'columns must be a table `[columns]` of schema_name = "csv column" (got list [1, 2])',
        ),
        ('columns = "date"\n', "(got str date)"),
        ("[columns]\nclose = 3\n", "[columns] close: each key must be one of date, open"),
        ('[columns]\nprice = "Close"\n', "[columns] price: each key must be one of"),
        (
            'volume_units = "lots"\n',
            "unknown key(s) volume_units; known: volume_unit, adjustment, [columns]",
        ),
    ],
)
def test_a_source_toml_that_cannot_be_a_mapping_is_named(
    home: Path, unchanged: None, tmp_path: Path, layout: str, fragment: str
) -> None:
    folder = csv_folder(tmp_path / "csv", layout=layout)
    refused(
        invoke("ingest", "--source", f"csv:{folder}", "--universe", "all"),
        1,
        f"{folder / 'source.toml'}: ",
        fragment,
    )


@pytest.mark.parametrize("spec", ["synthetic:99999999999", "synthetic:0", "synthetic:5001"])
def test_a_synthetic_market_beyond_its_codes_is_refused_before_it_is_drawn(
    home: Path, unchanged: None, spec: str
) -> None:
    refused(
        invoke("ingest", "--source", spec, "--universe", "all"),
        1,
        f"--source {spec}: the synthetic source has 1 to 5000 symbols",
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"[oomrl]\naccount = 'caf\xe9'\n", "is not UTF-8 text"),
        (b"[oomrl]\n[oomrl.kill]\nthreshold = 0.1\n", "unknown setting(s) [oomrl.kill]"),
    ],
)
def test_config_files_that_would_be_misread_are_named(
    home: Path, unchanged: None, tmp_path: Path, text: bytes, fragment: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(text)
    refused(
        invoke("account", "show", env={"OOMRL_CONFIG": str(config)}),
        1,
        f"config file {config}",
        fragment,
    )


def test_replay_with_start_after_end_names_the_two_dates(home: Path, unchanged: None) -> None:
    refused(
        invoke(
            "replay", "--strategy", "daily_momentum", "--start", "2024-08-01", "--end", "2024-07-01"
        ),
        1,
        "--start 2024-08-01 is after --end 2024-07-01",
    )


@pytest.mark.slow  # a real process: what reaches its stderr
def test_a_csv_ingest_with_a_bad_date_prints_no_pandas_warning(
    oomrl_home: Path, tmp_path: Path
) -> None:
    folder = csv_folder(
        tmp_path / "csv",
        "date,open,high,low,close,volume\nnot-a-date,1,1,1,1,1\n2024-07-01,100,101,99,100,1000\n",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestration",
            "ingest",
            "--source",
            f"csv:{folder}",
            "--universe",
            "all",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OOMRL_HOME": str(oomrl_home)},
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and done.stderr == ""
    assert "missing_value: date" in done.stdout  # the bad row is quarantined with its reason


@pytest.mark.slow  # a repair up to its critic over a real endpoint
def test_a_malformed_model_reply_ends_the_repair_as_an_invalid_answer_not_a_defect(
    home: Path, tmp_path: Path
) -> None:
    from tests.agent.fake_openai import Scripted, serve_fake_openai

    alert = write_json(tmp_path / "alert.json", {"alert_id": "m-1", "account": "paper"})
    before = {k: v for k, v in snapshot(home).items() if k.startswith("workspace")}
    with serve_fake_openai() as server:
        server.queue(*[Scripted(body=b'{"id": "x", "choices": [{"index": 0, "mess')] * 2)
        result = invoke(
            "repair",
            "--autopsy",
            str(alert),
            "--auto-approve",
            "--provider",
            "openai",
            env={"OOMRL_LLM_BASE_URL": server.url},
        )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    (run,) = (home / "runs").glob("repair-*")
    # A repair that ran says where its folder is, then why it failed: never "unexpected ... (a
    # defect)".
    assert result.output.splitlines() == [
        f"run folder: {run}",
        "error: repair ended Failed at critic: InvalidAnswerError: critic: the endpoint's "
        "reply was not a chat "
        "completion twice (the reply is not a chat completion: <root>: Invalid JSON: EOF "
        "while parsing a string "
        f"at line 1 column 42); the reply is kept in {run / 'transcript.jsonl'}",
    ]
    kept = [json.loads(line) for line in (run / "transcript.jsonl").read_text().splitlines()]
    assert [r["reply"] for r in kept if r["kind"] == "malformed"] == [
        '{"id": "x", "choices": [{"index": 0, "mess'
    ] * 2
    assert {
        k: v for k, v in snapshot(home).items() if k.startswith("workspace")
    } == before  # no version
