"""`oomrl report --account` and `oomrl diagnose` over the real ledger and the bundled sample
store."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from oomrl.data.store import MarketStore
from oomrl.errors import MetricsInputError
from oomrl.metrics.attribution import (
    account_returns,
    benchmark_returns,
    store_style_factors,
    universe_panel,
)
from oomrl.ops.cli import app
from tests.diagnostics.conftest import seed_account_home

runner = CliRunner()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OOMRL_HOME with the sample store and one account (see seed_account_home)."""
    root = tmp_path_factory.mktemp("acct-home")
    seed_account_home(root)
    return root


@pytest.mark.slow
def test_report_for_an_account(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_HOME", str(home))
    result = runner.invoke(app, ["report", "--account", "demo"])
    assert result.exit_code == 0, result.output
    paths = [Path(p) for p in result.stdout.split()]
    assert paths[0].name == "tearsheet.html" and paths[0].parent.parent == home / "runs"
    assert [p.name for p in paths[2:]] == [
        "tearsheet.png",
        "equity.png",
        "underwater.png",
        "rolling_ir.png",
        "friction.png",
    ]
    summary = paths[1].read_text()
    assert "Benchmark: CSI 300 price index (000300)" in summary
    assert "|  | aaaa1111 | bbbb2222 |" in summary  # versions (unknown to any workspace) as phases
    assert "## Style attribution" in summary and "| momentum |" in summary
    tr = runner.invoke(
        app,
        ["report", "--account", "demo", "--benchmark", "total_return", "--out", str(home / "tr")],
    )
    assert tr.exit_code == 0, tr.output
    assert "CSI 300 total-return index (H00300)" in (home / "tr" / "summary.md").read_text()


@pytest.mark.slow  # the seeded home: ~10 s to build, no other fast test uses it
def test_report_for_an_unknown_account(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_HOME", str(home))
    result = runner.invoke(app, ["report", "--account", "nobody"])
    assert result.exit_code == 1 and "no NAV history" in result.stderr


@pytest.mark.slow
def test_diagnose_prints_autopsies_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_HOME", str(home))
    result = runner.invoke(app, ["diagnose", "--account", "demo", "--as-of", "2025-06-30"])
    assert result.exit_code == 0, result.output
    autopsies = json.loads(result.stdout)
    assert "daily_loss" in {a["trigger"]["rule"] for a in autopsies}
    assert all(a["diagnostics"]["strategy_version"] == "bbbb2222" for a in autopsies)
    again = runner.invoke(app, ["diagnose", "--account", "demo", "--as-of", "2025-06-30"])
    assert again.exit_code == 0 and json.loads(again.stdout) == []
    bad = runner.invoke(app, ["diagnose", "--account", "nobody", "--as-of", "2025-06-30"])
    assert bad.exit_code == 1 and "account nobody has no NAV on or before 2025-06-30" in bad.stderr
    bad_date = runner.invoke(app, ["diagnose", "--account", "demo", "--as-of", "someday"])
    assert bad_date.exit_code == 1 and "is not a date" in bad_date.stderr


@pytest.mark.slow
def test_report_on_a_fresh_home_says_there_is_no_nav(oomrl_home: Path) -> None:
    result = runner.invoke(app, ["report", "--account", "x"])
    assert result.exit_code == 1 and "account 'x' has no NAV history in the ledger" in result.stderr


def test_store_helpers(home: Path, tmp_path: Path) -> None:
    store = MarketStore(home / "data")
    with pytest.raises(MetricsInputError, match="benchmark must be one of"):
        benchmark_returns(store, "gross")
    with pytest.raises(MetricsInputError, match="no price levels"):
        benchmark_returns(MarketStore(tmp_path / "empty"))
    with pytest.raises(MetricsInputError, match="no bars"):
        store_style_factors(
            MarketStore(tmp_path / "empty"), pd.Timestamp("2025-01-02"), pd.Timestamp("2025-02-03")
        )
    with pytest.raises(MetricsInputError, match="no NAV history"):
        account_returns(pd.DataFrame(columns=["date", "realized_return"]), "x")
    dates = pd.DatetimeIndex(["2024-06-14", "2024-06-17", "2024-06-18"])
    members = pd.DataFrame(
        {
            "effective_date": pd.to_datetime(["2023-12-11", "2023-12-11", "2024-06-17"]),
            "symbol": ["A", "B", "B"],
        }
    )
    flags = universe_panel(members, dates, pd.Index(["A", "B", "C"]))
    assert flags.to_numpy().tolist() == [
        [True, True, False],
        [False, True, False],
        [False, True, False],
    ]


@pytest.mark.slow
def test_report_says_why_style_attribution_is_missing(home: Path, tmp_path: Path) -> None:
    from oomrl.metrics.attribution import account_report
    from oomrl.portfolio.ledger import Ledger

    class IndexOnly:
        """The real store's index, but no bars (e.g. a store holding only benchmark levels)."""

        def __init__(self, store: MarketStore) -> None:
            self.store = store

        def read_index(self, code: str = "000300", kind: str = "price") -> pd.Series:
            return self.store.read_index(code, kind)

        def read_panel(
            self, field: str, start: object = None, end: object = None, symbols: object = None
        ) -> pd.DataFrame:
            return pd.DataFrame()

        def read_membership(self) -> pd.DataFrame:
            return self.store.read_membership()

    ledger = Ledger(f"sqlite:///{home / 'ledger.db'}")
    report = account_report(ledger, IndexOnly(MarketStore(home / "data")), "demo", tmp_path / "r")
    assert report.style is None
    assert (
        "- Style attribution unavailable: the market store has no bars"
        in report.markdown.read_text()
    )
    assert "<h2>Notes</h2>" in report.html.read_text()
