"""Each alert rule fires on data that should trigger it and stays quiet otherwise; ids are
stable."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oomrl.diagnostics.rules import Alert, AlertConfig, evaluate, load_config
from oomrl.errors import DataValidationError
from tests.diagnostics.conftest import nav_frame, quiet_returns

CONFIG = AlertConfig()


def _rules(
    nav: pd.DataFrame, benchmark: pd.Series | None = None, as_of: object = None
) -> dict[str, Alert]:
    day = as_of or nav["date"].iloc[-1]
    alerts = evaluate(nav, None, CONFIG, day, "acct", benchmark)
    return {a.rule: a for a in alerts}


def test_quiet_account_raises_nothing() -> None:
    assert _rules(nav_frame(quiet_returns(120))) == {}


def test_daily_loss_absolute_and_zscore() -> None:
    base = list(quiet_returns(80, scale=0.002))
    big = _rules(nav_frame(base + [-0.04]))["daily_loss"]
    assert big.severity == "critical" and big.value == pytest.approx(-0.04)  # both size and z
    z_only = _rules(nav_frame(base + [-0.015]))["daily_loss"]
    assert z_only.severity == "warning" and "z = " in z_only.message
    assert "daily_loss" not in _rules(nav_frame(base + [-0.004]))
    # without enough history a large loss still alerts on size alone
    assert _rules(nav_frame([0.001, -0.05]))["daily_loss"].severity == "warning"
    assert "daily_loss" not in _rules(nav_frame(list(quiet_returns(80, scale=0.02)) + [-0.025]))


def test_drawdown_levels_and_starting_capital() -> None:
    up_then_down = [0.01] * 10 + [-0.012] * 10  # about −11 % from the peak
    warn = _rules(nav_frame(up_then_down))["drawdown"]
    assert warn.severity == "warning" and warn.threshold == -0.10
    deeper = _rules(nav_frame(up_then_down + [-0.03, -0.03]))["drawdown"]
    assert deeper.severity == "critical" and deeper.alert_id != warn.alert_id
    assert "drawdown" not in _rules(nav_frame([0.01] * 10 + [-0.01] * 5))
    # a first-day loss is a drawdown: the starting capital is the first high-water mark
    assert _rules(nav_frame([-0.11, 0.001]))["drawdown"].value == pytest.approx(0.89 * 1.001 - 1)


def test_principal_loss_approaching_and_reaching_tau() -> None:
    approaching = _rules(nav_frame([-0.02] * 9))  # L ≈ 16.6 %: above 0.75 τ = 15 %
    assert approaching["principal_loss_approaching"].severity == "warning"
    reached = _rules(nav_frame([-0.02] * 12))  # L ≈ 21.5 %
    assert "principal_loss_approaching" not in reached
    assert reached["principal_loss_reached"].severity == "critical"
    assert reached["principal_loss_reached"].threshold == 0.20
    calm = _rules(nav_frame([-0.02] * 5))  # L ≈ 9.6 %
    assert not {"principal_loss_approaching", "principal_loss_reached"} & set(calm)


def test_rolling_ir_decay_needs_a_benchmark() -> None:
    rng = np.random.default_rng(3)
    bench_values = rng.normal(0.002, 0.01, 80)
    lagging = bench_values - 0.002 + rng.normal(0, 0.002, 80)
    nav = nav_frame(lagging)
    bench = pd.Series(bench_values, index=nav["date"])
    alert = _rules(nav, bench)["ir_decay"]
    assert alert.value <= -1.0
    assert "ir_decay" not in _rules(nav)  # no benchmark, no IR rule
    leading = nav_frame(bench_values + 0.0005 + rng.normal(0, 0.002, 80))
    assert "ir_decay" not in _rules(leading, bench)
    assert "ir_decay" not in _rules(nav_frame(lagging[:40]), bench)  # shorter than the window


def test_execution_decay_over_the_window() -> None:
    leaky = _rules(nav_frame(quiet_returns(40), leakage=0.0008))["execution_decay"]
    assert leaky.value == pytest.approx(0.016) and leaky.threshold == 0.01
    assert "execution_decay" not in _rules(nav_frame(quiet_returns(40), leakage=0.0002))


def test_turnover_spike_absolute_and_relative() -> None:
    assert _rules(nav_frame(quiet_returns(30), turnover=0.5))[
        "turnover_spike"
    ].value == pytest.approx(126.0)
    relative = [0.01] * 40 + [0.05] * 20  # 2.5× → 12.6× a year
    assert "turnover_spike" in _rules(nav_frame(quiet_returns(60), turnover=relative))
    weekly = ([0.3] + [0.0] * 4) * 12  # a weekly rebalance of 30 %: 15× a year, steady
    assert "turnover_spike" not in _rules(nav_frame(quiet_returns(60), turnover=weekly))


def test_the_same_episode_keeps_its_id_and_a_new_one_gets_a_new_id() -> None:
    path = [0.01] * 10 + [-0.012] * 10 + [0.0] * 3
    nav = nav_frame(path)
    ids = {_rules(nav, as_of=nav["date"].iloc[k])["drawdown"].alert_id for k in (19, 20, 22)}
    assert len(ids) == 1
    recovered = nav_frame(path + [0.05] * 3 + [-0.04] * 3)
    later = _rules(recovered)["drawdown"]
    assert later.alert_id not in ids and later.window_start > nav["date"].iloc[22].date()


def test_as_of_uses_the_last_nav_on_or_before_it() -> None:
    nav = nav_frame(list(quiet_returns(30)) + [-0.05])
    saturday = nav["date"].iloc[-1] + pd.Timedelta(days=1)
    assert _rules(nav, as_of=saturday)["daily_loss"].as_of == nav["date"].iloc[-1].date()
    assert "daily_loss" not in _rules(nav, as_of=nav["date"].iloc[-2])


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: f.drop(columns="turnover"), "lacks column(s) turnover"),
        (
            lambda f: f.assign(realized_return=[np.nan] + [0.0] * (len(f) - 1)),
            "missing or infinite",
        ),
        (lambda f: f.assign(nav=-1.0), "non-positive NAV"),
        (lambda f: pd.concat([f, f.tail(1)]), "duplicate dates"),
        (lambda f: f.iloc[:0], "no NAV on or before"),
    ],
)
def test_bad_nav_frames_are_rejected(change: object, message: str) -> None:
    with pytest.raises(DataValidationError, match=re.escape(message)):
        evaluate(change(nav_frame(quiet_returns(10))), None, CONFIG, "2030-01-01", "acct")  # type: ignore[operator]


def test_config_files(tmp_path: Path) -> None:
    toml = tmp_path / "alerts.toml"
    toml.write_text("[alerts]\ndaily_loss_abs = 0.05\n")
    assert load_config(toml).daily_loss_abs == 0.05
    yml = tmp_path / "alerts.yaml"
    yml.write_text("drawdown_warning: 0.2\n")
    assert load_config(yml).drawdown_warning == 0.2
    assert load_config(None) == AlertConfig()
    bad = tmp_path / "bad.yaml"
    bad.write_text("daily_loss_abs: -1\n")
    with pytest.raises(DataValidationError, match="invalid"):
        load_config(bad)
    with pytest.raises(DataValidationError, match="does not exist"):
        load_config(tmp_path / "none.toml")


def test_a_benchmark_that_misses_the_alert_date_skips_only_the_ir_rule() -> None:
    rng = np.random.default_rng(3)
    bench_values = rng.normal(0.002, 0.01, 80)
    nav = nav_frame(list(bench_values[:-1] - 0.003) + [-0.05])
    stale = pd.Series(bench_values, index=nav["date"]).iloc[:-1]  # not updated for the last day
    rules = _rules(nav, stale)
    assert "ir_decay" not in rules and "daily_loss" in rules
    assert "ir_decay" in _rules(nav, pd.Series(bench_values, index=nav["date"]))
