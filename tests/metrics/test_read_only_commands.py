"""Read commands never create state: OOMRL_HOME is byte for byte what it was (or still absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomrl.ops.cli import app
from tests.metrics.conftest import CSI300_PRICE, CSI300_TOTAL_RETURN
from tests.metrics.traded_account import ACCOUNT, TradedAccount

runner = CliRunner()
READS = (
    ["versions", "list", "--account", ACCOUNT],
    ["versions", "show", "v1", "--account", ACCOUNT],
    ["account", "show", "--account", ACCOUNT],
    ["data", "quarantine"],
    ["version"],
    ["metrics", "--returns", str(CSI300_TOTAL_RETURN), "--benchmark", str(CSI300_PRICE)],
)


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under root: size, modification time (ns) and mode."""
    found = {}
    for folder, names, files in os.walk(root):
        for name in [*names, *files]:
            path = Path(folder) / name
            info = path.lstat()
            found[str(path.relative_to(root))] = (
                info.st_size if path.is_file() else 0,
                info.st_mtime_ns,
                info.st_mode,
            )
    return found


@pytest.mark.slow
def test_reads_in_a_home_that_does_not_exist_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "never-used"
    monkeypatch.setenv("OOMRL_HOME", str(home))
    monkeypatch.delenv("OOMRL_LEDGER_URL", raising=False)
    outcomes = {}
    for argv in READS:
        result = runner.invoke(app, argv)
        outcomes[" ".join(argv[:2])] = (result.exit_code, result.output)
        assert not home.exists(), f"`oomrl {' '.join(argv)}` created {home}"
    assert (
        outcomes["versions list"][0] == 0
        and "no strategy versions yet" in outcomes["versions list"][1]
    )
    assert (
        outcomes["versions show"][0] == 1
        and "no strategy workspace" in outcomes["versions show"][1]
    )
    assert (
        outcomes["account show"][0] == 1
        and "the ledger does not exist yet" in outcomes["account show"][1]
    )
    assert outcomes["metrics --returns"][0] == 0


def test_reads_leave_a_traded_home_unchanged(
    traded: TradedAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = traded.settings.store.home
    monkeypatch.setenv("OOMRL_HOME", str(home))
    monkeypatch.delenv("OOMRL_LEDGER_URL", raising=False)
    before = snapshot(home)
    outputs = {}
    for argv in READS:
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
        outputs[" ".join(argv[:2])] = result.output
    assert snapshot(home) == before
    listed = outputs["versions list"].splitlines()
    assert listed[0].split()[:2] == ["v1", traded.v1[:12]] and listed[1].split()[:3] == [
        "*",
        "v2",
        traded.v2[:12],
    ]
    assert (
        traded.v1 in outputs["versions show"]
        and f"{ACCOUNT} status=ACTIVE" in outputs["account show"]
    )
    assert f"version=v2 daily_momentum ({traded.v2[:12]})" in " ".join(
        outputs["account show"].split()
    )
