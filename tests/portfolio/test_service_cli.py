"""The wiring behind the CLI and flows, and the `oomrl rebalance|replay|account` commands
themselves."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from oomrl.checkout import repo_root
from oomrl.data.schema import BAR_COLUMNS
from oomrl.data.store import MarketStore
from oomrl.errors import OomrlError
from oomrl.market import calendar
from oomrl.ops.cli import app
from oomrl.portfolio.service import last_session, open_ledger, parse_params, run_replay
from oomrl.repair.trading import resolve_strategy, run_rebalance
from oomrl.settings import get_settings

SYMBOLS = ["600000.SH", "600036.SH", "000001.SZ", "601318.SH", "600519.SH", "000002.SZ"]
runner = CliRunner()


def seed(home: Path) -> list[date]:
    """Validated random-walk bars on XSHG sessions in the home's store, plus membership."""
    days = calendar.sessions("2024-01-02", "2024-04-30")
    rng = np.random.default_rng(3)
    close = 20 * np.exp(np.cumsum(rng.normal(0.0005, 0.015, (len(days), len(SYMBOLS))), 0))
    rows = [
        {
            "date": d,
            "symbol": s,
            "open": round(close[t, i], 2),
            "high": round(close[t, i] * 1.01, 2),
            "low": round(close[t, i] * 0.99, 2),
            "close": round(close[t, i], 2),
            "volume": 5e6,
            "amount": np.nan,
            "adjustment": "qfq",
            "prev_close_raw": round(close[t - 1, i], 2) if t else np.nan,
        }
        for t, d in enumerate(days)
        for i, s in enumerate(SYMBOLS)
    ]
    store = MarketStore(home / "data")
    store.write_bars(pd.DataFrame(rows, columns=list(BAR_COLUMNS)))
    store.write_membership(
        pd.DataFrame(
            {"effective_date": pd.Timestamp("2023-12-11"), "symbol": SYMBOLS[:4], "name": "x"}
        )
    )
    return [d.date() for d in days]


def test_replay_uses_point_in_time_members_and_params(oomrl_home: Path) -> None:
    seed(oomrl_home)
    result = run_replay(
        get_settings(), "daily_momentum", date(2024, 3, 1), date(2024, 4, 30), '{"top_k": 2}'
    )
    assert set(result.fills["symbol"]) <= set(SYMBOLS[:4])  # only index members are bought
    assert len(result.nav) > 30 and result.jail == "bwrap"  # the bundled strategy ran in its jail
    with pytest.raises(OomrlError, match="unknown strategy"):
        run_replay(get_settings(), "nope", date(2024, 3, 1), date(2024, 4, 30))
    with pytest.raises(
        OomrlError,
        match=r"start 2030-01-01 is after the last session in the market store: "
        r"it holds 2024-01-02\.\.2024-04-30",
    ):
        run_replay(get_settings(), "daily_momentum", date(2030, 1, 1), date(2030, 2, 1))
    with pytest.raises(OomrlError, match="invalid params for daily_momentum") as refused:
        run_replay(
            get_settings(),
            "daily_momentum",
            date(2024, 3, 1),
            date(2024, 4, 30),
            '{"top_k": 0, "lookback": "x"}',
        )
    # One line, every problem named, no pydantic URL (said by the host)
    message = str(refused.value)
    assert "\n" not in message and "http" not in message
    assert (
        "top_k: Input should be greater than or equal to 1 (got 0)" in message
        and "lookback:" in message
    )


def test_params_are_parsed_with_clear_errors() -> None:
    assert parse_params('{"top_k": 3}') == {"top_k": 3}
    assert (
        parse_params("") == {} and parse_params(None) == {} and parse_params({"a": 1}) == {"a": 1}
    )
    with pytest.raises(OomrlError, match="not valid JSON"):
        parse_params("{top_k")
    with pytest.raises(OomrlError, match="JSON object"):
        parse_params("[1]")


def test_last_session_skips_weekends_and_holidays() -> None:
    assert last_session(date(2024, 2, 12)) == date(2024, 2, 8)  # Spring Festival
    assert last_session(date(2024, 3, 3)) == date(2024, 3, 1)
    with pytest.raises(OomrlError):
        last_session(date(1990, 1, 1))


def test_active_workspace_version_is_loaded_and_traded(oomrl_home: Path) -> None:
    from oomrl.repair.versions import StrategyVersions

    days = seed(oomrl_home)
    settings = get_settings()
    ledger = open_ledger(settings)
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    sha = versions.init()
    versions.activate(sha, "acct", "weekly_liquidity")
    resolved = resolve_strategy(settings, ledger, "acct")
    assert (resolved.name, resolved.version) == ("weekly_liquidity", sha)
    # The commit's own folder
    assert resolved.strategy.root == versions.materialize(sha) != repo_root()
    outcome = run_rebalance(settings, "acct", days[60])
    assert outcome.committed and outcome.strategy_version == sha and outcome.jail == "bwrap"
    assert set(ledger.nav_frame("acct")["strategy_version"]) == {sha}


@pytest.mark.slow
def test_cli_rebalance_replay_and_account(oomrl_home: Path) -> None:
    days = seed(oomrl_home)
    day = days[40].isoformat()
    dry = runner.invoke(app, ["rebalance", "--account", "cli", "--as-of", day, "--dry-run"])
    assert dry.exit_code == 0 and "dry run" in dry.output
    done = runner.invoke(app, ["rebalance", "--account", "cli", "--as-of", day])
    assert done.exit_code == 0 and "fills" in done.output
    again = runner.invoke(app, ["rebalance", "--account", "cli", "--as-of", day])
    assert "already committed" in again.output
    shown = runner.invoke(app, ["account", "show", "--account", "cli"])
    assert shown.exit_code == 0 and "ACTIVE" in shown.output and "positions" in shown.output
    replayed = runner.invoke(
        app,
        [
            "replay",
            "--strategy",
            "daily_momentum",
            "--strategy",
            "weekly_liquidity",
            "--start",
            "2024-03-01",
            "--end",
            "2024-04-30",
            "--json",
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    summaries = json.loads(replayed.output)
    assert [s["strategy"] for s in summaries] == ["daily_momentum", "weekly_liquidity"]
    assert {"turnover", "total_costs", "slippage_leakage", "net_return"} <= set(summaries[0])
    table = runner.invoke(
        app,
        ["replay", "--strategy", "daily_momentum", "--start", "2024-03-01", "--end", "2024-04-30"],
    )
    assert "net return" in table.output


@pytest.mark.slow
def test_cli_refusals_exit_1_with_the_reason(oomrl_home: Path) -> None:
    days = seed(oomrl_home)
    bad_date = runner.invoke(app, ["rebalance", "--account", "x", "--as-of", "someday"])
    assert bad_date.exit_code == 1 and "not a date" in bad_date.output
    no_confirm = runner.invoke(app, ["account", "resume", "--account", "x"])
    assert no_confirm.exit_code == 1 and "--confirm" in no_confirm.output
    unknown = runner.invoke(app, ["account", "show", "--account", "ghost"])
    assert unknown.exit_code == 1 and "no account" in unknown.output
    ledger = open_ledger(get_settings())
    ledger.open_account("h", 1e6)
    ledger.halt("h", days[0], "principal loss 25%")
    refused = runner.invoke(app, ["rebalance", "--account", "h", "--as-of", days[40].isoformat()])
    assert refused.exit_code == 1 and "HALTED" in refused.output
    shown = runner.invoke(app, ["account", "show", "--account", "h"])
    assert "HALTED" in shown.output and "25%" in shown.output
    resumed = runner.invoke(app, ["account", "resume", "--account", "h", "--confirm"])
    assert resumed.exit_code == 0 and "resumed" in resumed.output
    not_halted = runner.invoke(app, ["account", "resume", "--account", "h", "--confirm"])
    assert not_halted.exit_code == 1
    bad_params = runner.invoke(
        app,
        [
            "replay",
            "--strategy",
            "daily_momentum",
            "--start",
            "2024-03-01",
            "--end",
            "2024-04-30",
            "--params",
            "{x",
        ],
    )
    assert bad_params.exit_code == 1 and "JSON" in bad_params.output


def test_replay_of_a_candidate_workspace_uses_its_code(oomrl_home: Path, tmp_path: Path) -> None:
    import shutil

    seed(oomrl_home)
    root = tmp_path / "candidate"
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "strategies",
        root / "strategies",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    module = root / "strategies" / "daily_momentum.py"
    module.write_text(module.read_text().replace("top_k: int = Field(10", "top_k: int = Field(1"))
    candidate = run_replay(
        get_settings(), "daily_momentum", date(2024, 3, 1), date(2024, 3, 29), workspace=root
    )
    bundled = run_replay(get_settings(), "daily_momentum", date(2024, 3, 1), date(2024, 3, 29))

    def buys_per_day(fills: pd.DataFrame) -> int:
        return int(fills[fills["side"] == "buy"].groupby("date")["symbol"].nunique().max())

    assert buys_per_day(candidate.fills) == 1  # the candidate's top_k = 1
    assert buys_per_day(bundled.fills) > 1


def test_a_version_from_before_the_strategy_api_still_replays_in_the_host(
    oomrl_home: Path, tmp_path: Path
) -> None:
    """A version committed before strategy_api (its own strategies/base.py, `from .base import
    ...`)."""
    import shutil

    seed(oomrl_home)
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "old_workspace", old)
    assert "from .base import" in (old / "strategies" / "weekly_liquidity.py").read_text()
    params = '{"lookback": 10, "skip": 1, "top_k": 3, "min_adv": 1e6}'
    then = run_replay(
        get_settings(),
        "weekly_liquidity",
        date(2024, 2, 1),
        date(2024, 4, 30),
        params,
        workspace=old,
    )
    now = run_replay(
        get_settings(), "weekly_liquidity", date(2024, 2, 1), date(2024, 4, 30), params
    )
    assert len(then.fills) > 10 and then.jail == "bwrap"
    pd.testing.assert_frame_equal(then.fills, now.fills)  # the same rules, then as now
    pd.testing.assert_frame_equal(
        then.nav.drop(columns="strategy_version"), now.nav.drop(columns="strategy_version")
    )
