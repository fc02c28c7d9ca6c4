"""Loss alert rules over an account's NAV history, with set thresholds and stable alert ids.

Thresholds are configurable. Event rules (a day's loss) are keyed by their date. State rules
(drawdown, principal loss, IR decay, execution decay, turnover) are keyed by an episode's first
session. An episode is a run of sessions in which the condition held without a break. So a
condition that persists for weeks raises one alert. A new episode (after recovery) raises a new
one. The id is a hash of (account, rule, severity, key).
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oomrl.diagnostics.autopsy import Constraints, Severity
from oomrl.errors import DataValidationError
from oomrl.metrics.io import validate_returns
from oomrl.metrics.performance import PERIODS_PER_YEAR, ROLLING_IR_WINDOW, rolling_information_ratio

NAV_COLUMNS = (
    "date",
    "nav",
    "realized_return",
    "frictionless_return",
    "slippage_leakage",
    "turnover",
    "principal_loss",
)


class AlertConfig(BaseModel):
    """Thresholds of every rule (fractions of NAV), and the default constraints of a mandate."""

    model_config = ConfigDict(extra="forbid")

    daily_loss_abs: float = Field(
        0.03, gt=0, description="A day's loss at least this large alerts."
    )
    daily_loss_z: float = Field(
        3.0, gt=0, description="... or this many std below the trailing mean."
    )
    zscore_window: int = Field(60, ge=5)
    zscore_min_obs: int = Field(20, ge=3)
    drawdown_warning: float = Field(0.10, gt=0, lt=1)
    drawdown_critical: float = Field(0.15, gt=0, lt=1)
    kill_threshold: float = Field(
        0.20, gt=0, lt=1, description="τ: principal loss that halts the account."
    )
    principal_approach: float = Field(0.75, gt=0, lt=1, description="Warn at this fraction of τ.")
    ir_window: int = Field(ROLLING_IR_WINDOW, ge=10)
    ir_threshold: float = Field(-1.0, description="Rolling IR at or below this alerts.")
    leakage_window: int = Field(20, ge=1)
    leakage_threshold: float = Field(0.01, gt=0, description="Σ slippage leakage over the window.")
    turnover_window: int = Field(20, ge=1)
    turnover_annualized_max: float = Field(
        25.0, gt=0, description="Trailing turnover × 252/window cap."
    )
    turnover_spike_multiple: float = Field(
        3.0, gt=1, description="... or this multiple of the prior window."
    )
    turnover_spike_floor: float = Field(
        8.0, ge=0, description="A relative spike must also exceed this."
    )
    mandate_defaults: Constraints = Constraints(
        rebalance="weekly", max_adv_participation=0.05, max_weekly_turnover=0.30
    )


def load_config(path: Path | None) -> AlertConfig:
    """Thresholds from a TOML, YAML or JSON file (keys of AlertConfig, optionally under
    [alerts])."""
    if path is None:
        return AlertConfig()
    if not path.exists():
        raise DataValidationError(f"alert config {path} does not exist")
    text = path.read_text()
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else (yaml.safe_load(text) or {})
        return AlertConfig.model_validate(data.get("alerts", data))
    except (tomllib.TOMLDecodeError, yaml.YAMLError, ValidationError, AttributeError) as exc:
        raise DataValidationError(f"alert config {path} is invalid: {exc}") from exc


class Alert(BaseModel):
    """One rule firing for one account."""

    model_config = ConfigDict(frozen=True)

    alert_id: str
    account: str
    rule: str
    severity: Severity
    as_of: date
    window_start: date
    value: float
    threshold: float
    message: str


def alert_id(account: str, rule: str, severity: str, key: date) -> str:
    """Deterministic id: the same account, rule, level and episode always hash to the same id."""
    text = json.dumps([account, rule, severity, key.isoformat()])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def prepare_nav(nav: pd.DataFrame, as_of: date | str | pd.Timestamp, account: str) -> pd.DataFrame:
    """The validated NAV history up to as_of, date-indexed; errors name what is wrong."""
    missing = [c for c in NAV_COLUMNS if c not in nav.columns]
    if missing:
        raise DataValidationError(f"nav frame of {account} lacks column(s) {', '.join(missing)}")
    frame = nav.assign(date=pd.to_datetime(nav["date"])).set_index("date").sort_index()
    frame = frame.loc[: pd.Timestamp(as_of)]
    if frame.empty:
        raise DataValidationError(
            f"account {account} has no NAV on or before {pd.Timestamp(as_of).date()}"
        )
    if not frame.index.is_unique:
        raise DataValidationError(f"nav frame of {account} has duplicate dates")
    numbers = frame[list(NAV_COLUMNS[1:])].astype(float)
    if numbers.isna().to_numpy().any() or not np.isfinite(numbers.to_numpy()).all():
        bad = numbers.index[~np.isfinite(numbers.to_numpy()).all(axis=1)][0]
        raise DataValidationError(
            f"nav frame of {account} has missing or infinite values on {bad.date()}"
        )
    if (numbers["nav"] <= 0).any():
        raise DataValidationError(f"nav frame of {account} has a non-positive NAV")
    return frame.assign(**{c: numbers[c] for c in numbers.columns})


def drawdown(frame: pd.DataFrame) -> pd.Series:
    """NAV over the running high-water mark − 1; the starting capital W₀ is the first mark."""
    start = frame["nav"].iloc[0] / (1.0 - frame["principal_loss"].iloc[0])
    return frame["nav"] / np.maximum(frame["nav"].cummax(), start) - 1.0


def turnover_annualized(frame: pd.DataFrame, window: int) -> pd.Series:
    """Mean daily turnover over the trailing window × 252."""
    return frame["turnover"].rolling(window, min_periods=1).mean() * PERIODS_PER_YEAR


def episode_start(condition: pd.Series) -> pd.Timestamp:
    """The first date of the unbroken run of True that ends at the last date."""
    breaks = condition.index[~condition.to_numpy()]
    return condition.index[0] if breaks.empty else condition.index[condition.index > breaks[-1]][0]


class RuleBook:
    """Evaluates each rule on the history ending at as_of."""

    def __init__(
        self, frame: pd.DataFrame, config: AlertConfig, account: str, benchmark: pd.Series | None
    ) -> None:
        self.frame, self.config, self.account, self.benchmark = frame, config, account, benchmark
        self.day = frame.index[-1]

    def _alert(
        self,
        rule: str,
        severity: Severity,
        key: pd.Timestamp,
        value: float,
        threshold: float,
        message: str,
    ) -> Alert:
        return Alert(
            alert_id=alert_id(self.account, rule, severity, key.date()),
            account=self.account,
            rule=rule,
            severity=severity,
            as_of=self.day.date(),
            window_start=key.date(),
            value=float(value),
            threshold=float(threshold),
            message=message,
        )

    def _state(
        self,
        rule: str,
        severity: Severity,
        condition: pd.Series,
        value: float,
        threshold: float,
        message: str,
    ) -> list[Alert]:
        if not bool(condition.iloc[-1]):
            return []
        return [self._alert(rule, severity, episode_start(condition), value, threshold, message)]

    def daily_loss(self) -> list[Alert]:
        c, r = self.config, self.frame["realized_return"]
        today = float(r.iloc[-1])
        past = r.iloc[:-1].iloc[-c.zscore_window :]
        z = math.nan
        if len(past) >= c.zscore_min_obs and past.std(ddof=1) > 0:
            z = (today - past.mean()) / past.std(ddof=1)
        by_size, by_z = today <= -c.daily_loss_abs, (not math.isnan(z)) and z <= -c.daily_loss_z
        if not (by_size or by_z):
            return []
        severity: Severity = "critical" if by_size and by_z else "warning"
        z_text = f"z = {z:.1f}" if not math.isnan(z) else "z n/a"
        return [
            self._alert(
                "daily_loss",
                severity,
                self.day,
                today,
                -c.daily_loss_abs,
                f"daily return {today:.2%} ({z_text}) breaches the loss limits "
                f"(−{c.daily_loss_abs:.1%} or z ≤ −{c.daily_loss_z:g})",
            )
        ]

    def drawdown(self) -> list[Alert]:
        c, dd = self.config, drawdown(self.frame)
        levels: tuple[tuple[Severity, float], ...] = (
            ("critical", c.drawdown_critical),
            ("warning", c.drawdown_warning),
        )
        for severity, level in levels:
            alerts = self._state(
                "drawdown",
                severity,
                dd <= -level,
                dd.iloc[-1],
                -level,
                f"drawdown {dd.iloc[-1]:.2%} is beyond −{level:.0%} ({severity})",
            )
            if alerts:
                return alerts
        return []

    def principal_loss(self) -> list[Alert]:
        c, loss = self.config, self.frame["principal_loss"]
        reached = self._state(
            "principal_loss_reached",
            "critical",
            loss >= c.kill_threshold,
            loss.iloc[-1],
            c.kill_threshold,
            f"principal loss {loss.iloc[-1]:.2%} reached τ = "
            f"{c.kill_threshold:.0%}: the account halts",
        )
        if reached:
            return reached
        level = c.principal_approach * c.kill_threshold
        return self._state(
            "principal_loss_approaching",
            "warning",
            loss >= level,
            loss.iloc[-1],
            level,
            f"principal loss {loss.iloc[-1]:.2%} is approaching τ = {c.kill_threshold:.0%} "
            f"(warning at {level:.1%})",
        )

    def ir_decay(self) -> list[Alert]:
        if self.benchmark is None or len(self.frame) < self.config.ir_window:
            return []
        ir = self.rolling_ir()
        threshold = self.config.ir_threshold
        return self._state(
            "ir_decay",
            "warning",
            (ir <= threshold).fillna(False),
            ir.iloc[-1],
            threshold,
            f"rolling {self.config.ir_window}-day IR {ir.iloc[-1]:.2f} "
            f"is at or below {threshold:g}",
        )

    def rolling_ir(self) -> pd.Series:
        """Rolling IR on the dates the benchmark covers.

        It is all NaN (rule skipped) when the benchmark misses the alert date. So a stale benchmark
        never blocks the loss rules.
        """
        blank = pd.Series(np.nan, index=self.frame.index)
        if self.benchmark is None:
            return blank
        bench = validate_returns(self.benchmark, "benchmark")
        common = self.frame.index.intersection(bench.index)
        if self.day not in common:
            return blank
        r = self.frame["realized_return"].loc[common]
        return rolling_information_ratio(r, bench.loc[common], self.config.ir_window).reindex(
            self.frame.index
        )

    def execution_decay(self) -> list[Alert]:
        c = self.config
        leak = self.frame["slippage_leakage"].rolling(c.leakage_window, min_periods=1).sum()
        return self._state(
            "execution_decay",
            "warning",
            leak >= c.leakage_threshold,
            leak.iloc[-1],
            c.leakage_threshold,
            f"slippage leakage {leak.iloc[-1]:.2%} over "
            f"{c.leakage_window} sessions exceeds {c.leakage_threshold:.2%}",
        )

    def turnover_spike(self) -> list[Alert]:
        c = self.config
        annual = turnover_annualized(self.frame, c.turnover_window)
        before = annual.shift(c.turnover_window)
        spike = (annual >= c.turnover_annualized_max) | (
            (annual >= c.turnover_spike_multiple * before) & (annual >= c.turnover_spike_floor)
        )
        return self._state(
            "turnover_spike",
            "warning",
            spike,
            annual.iloc[-1],
            c.turnover_annualized_max,
            f"turnover {annual.iloc[-1]:.1f}× a year over {c.turnover_window} sessions "
            f"(cap {c.turnover_annualized_max:g}×, or {c.turnover_spike_multiple:g}× the "
            "prior window)",
        )


def evaluate(
    nav: pd.DataFrame,
    fills: pd.DataFrame | None,
    config: AlertConfig,
    as_of: date | str,
    account: str,
    benchmark: pd.Series | None = None,
) -> list[Alert]:
    """Every alert the rules raise on as_of (the last NAV date on or before it).

    `fills` is unused by the rules; the critic reads it. It is accepted so callers pass the ledger
    frames together. `benchmark` (daily CSI 300 returns) enables the rolling-IR rule.
    """
    del fills
    rules = RuleBook(prepare_nav(nav, as_of, account), config, account, benchmark)
    return [
        *rules.principal_loss(),
        *rules.drawdown(),
        *rules.daily_loss(),
        *rules.execution_decay(),
        *rules.turnover_spike(),
        *rules.ir_decay(),
    ]
