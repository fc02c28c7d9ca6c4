"""The deterministic critic: an alert and the ledger's evidence make an Autopsy with a mandate.

Root causes are checked in order of how directly the evidence points at them:
1. execution: orders above the ADV participation cap. Or impact dominates costs while leakage is
   high.
2. over-trading: turnover above the cap, or costs eating a visible share of NAV.
3. signal: losses that the frictionless return already shows; execution is clean.
Each cause maps to a mandate in words and the same mandate as `Constraints`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from oomrl.diagnostics.autopsy import (
    Autopsy,
    AutopsyMetrics,
    Constraints,
    CostBreakdown,
    Diagnostics,
    Evidence,
    Trigger,
)
from oomrl.diagnostics.rules import (
    Alert,
    AlertConfig,
    RuleBook,
    drawdown,
    prepare_nav,
    turnover_annualized,
)
from oomrl.errors import DataValidationError

COST_COLUMNS = ("commission", "stamp_duty", "transfer_fee", "impact_cost")
IMPACT_DOMINANT = 0.5  # impact is at least half of all costs
COSTS_VISIBLE = 0.002  # costs above 0.2 % of NAV over the window are a cause in themselves
DRAWDOWN_MANDATE_FLOOR = 0.05


FILL_COLUMNS = ("date", "quantity", "price", *COST_COLUMNS, "adv_participation")


def _evidence(
    frame: pd.DataFrame, fills: pd.DataFrame, start: pd.Timestamp, cap: float
) -> Evidence:
    missing = [c for c in FILL_COLUMNS if c not in fills.columns]
    if missing:
        raise DataValidationError(f"fills frame lacks column(s) {', '.join(missing)}")
    window = frame.loc[start:]
    part = fills.assign(date=pd.to_datetime(fills["date"])) if len(fills) else fills
    if len(part):
        part = part[(part["date"] >= start) & (part["date"] <= frame.index[-1])]
    costs = {c: float(part[c].fillna(0).sum()) if len(part) else 0.0 for c in COST_COLUMNS}
    total = sum(costs.values())
    participation = (
        part["adv_participation"].dropna().astype(float) if len(part) else pd.Series(dtype=float)
    )
    return Evidence(
        window_start=window.index[0].date(),
        window_end=window.index[-1].date(),
        sessions=len(window),
        fills=len(part),
        traded_value=float((part["quantity"].abs() * part["price"]).sum()) if len(part) else 0.0,
        costs=CostBreakdown(**costs, total=total),
        costs_over_nav=total / float(window["nav"].mean()),
        impact_share_of_costs=costs["impact_cost"] / total if total > 0 else None,
        adv_participation_median=float(participation.median()) if len(participation) else None,
        adv_participation_max=float(participation.max()) if len(participation) else None,
        fills_over_participation_cap=int((participation > cap).sum()),
        frictionless_return=float(np.prod(1 + window["frictionless_return"].to_numpy()) - 1),
        realized_return=float(np.prod(1 + window["realized_return"].to_numpy()) - 1),
    )


def _diagnosis(
    alert: Alert, ev: Evidence, metrics: AutopsyMetrics, config: AlertConfig
) -> tuple[str, str, Constraints, list[str]]:
    """(root cause, mandate, constraints, findings) from the evidence, first matching cause wins."""
    base = config.mandate_defaults
    findings = [
        (
            f"{ev.fills} fills, {ev.costs.total:,.0f} CNY costs ({ev.costs_over_nav:.2%} of NAV) "
            f"over {ev.sessions} sessions"
        ),
        (
            f"frictionless {ev.frictionless_return:.2%} vs realized {ev.realized_return:.2%}; "
            f"leakage {metrics.slippage_leakage:.2%}"
        ),
        f"turnover {metrics.turnover_annualized:.1f}× a year",
    ]
    if ev.adv_participation_max is not None:
        findings.append(
            f"ADV participation median {ev.adv_participation_median:.1%}, max "
            f"{ev.adv_participation_max:.1%}; {ev.fills_over_participation_cap} fill(s) above "
            f"the {base.max_adv_participation:.0%} cap"
        )
    impact_heavy = (
        ev.impact_share_of_costs or 0.0
    ) >= IMPACT_DOMINANT and metrics.slippage_leakage >= config.leakage_threshold
    if ev.fills_over_participation_cap > 0 or impact_heavy:
        cause = (
            "Aggressive crossing exceeding order book depth: "
            f"{ev.fills_over_participation_cap} fill(s) "
            f"above {base.max_adv_participation:.0%} of ADV, impact "
            f"{(ev.impact_share_of_costs or 0):.0%} of costs"
        )
        return (
            cause,
            "Enforce volume limits and reduce turnover frequency",
            base.model_copy(update={"rebalance": "weekly"}),
            findings,
        )
    if (
        metrics.turnover_annualized >= config.turnover_annualized_max
        or ev.costs_over_nav >= COSTS_VISIBLE
    ):
        cause = (
            f"Over-trading: turnover {metrics.turnover_annualized:.1f}× a year, costs "
            f"{ev.costs_over_nav:.2%} of NAV in {ev.sessions} sessions"
        )
        return (
            cause,
            "Reduce turnover: rebalance weekly at most and cap the weekly turnover",
            base.model_copy(update={"rebalance": "weekly"}),
            findings,
        )
    if alert.rule == "ir_decay":
        cause = (
            f"Signal decay: rolling IR {metrics.rolling_ir_60d:.2f} vs the CSI 300 while execution "
            f"is clean (leakage {metrics.slippage_leakage:.2%})"
        )
        return (
            cause,
            "Re-derive the signal so it beats the CSI 300 again; keep execution limits",
            base.model_copy(update={"min_information_ratio": 0.0}),
            findings,
        )
    tolerance = max(DRAWDOWN_MANDATE_FLOOR, config.drawdown_warning)
    cause = (
        f"Position losses, not execution: frictionless return {ev.frictionless_return:.2%} "
        f"over the window, leakage only {metrics.slippage_leakage:.2%}"
    )
    return (
        cause,
        "Cut exposure to the losing positions: cap position weights and limit the drawdown",
        base.model_copy(update={"max_position_weight": 0.05, "max_drawdown": tolerance}),
        findings,
    )


def autopsy_for(
    alert: Alert,
    nav: pd.DataFrame,
    fills: pd.DataFrame,
    config: AlertConfig,
    *,
    module: str,
    fallback_version: str | None = None,
    execution_log: str | None = None,
    benchmark: pd.Series | None = None,
) -> Autopsy:
    """The autopsy of one alert: metrics on its date, ledger evidence over its window, the mandate.

    The strategy version is the one the NAV shows live on the alert date. That is the code that
    lost the money. Else it is `fallback_version`, the account's active version.
    """
    frame = prepare_nav(nav, alert.as_of, alert.account)
    rules = RuleBook(frame, config, alert.account, benchmark)
    # evidence covers the alert's episode, and at least the leakage window before the alert date
    lookback = frame.index[max(0, len(frame) - config.leakage_window)]
    start = min(pd.Timestamp(alert.window_start), lookback)
    leakage = float(frame["slippage_leakage"].iloc[-config.leakage_window :].sum())
    ir = rules.rolling_ir().iloc[-1]
    # An autopsy holds finite numbers only
    metrics = AutopsyMetrics(
        daily_pnl=float(frame["realized_return"].iloc[-1]),
        slippage_leakage=leakage,
        drawdown=min(0.0, float(drawdown(frame).iloc[-1])),
        cumulative_principal_loss=float(frame["principal_loss"].iloc[-1]),
        turnover_annualized=float(turnover_annualized(frame, config.turnover_window).iloc[-1]),
        rolling_ir_60d=float(ir) if math.isfinite(ir) else None,
    )
    evidence = _evidence(frame, fills, start, config.mandate_defaults.max_adv_participation)
    cause, mandate, constraints, findings = _diagnosis(alert, evidence, metrics, config)
    live = frame["strategy_version"].iloc[-1] if "strategy_version" in frame else None
    version = str(live) if live is not None and pd.notna(live) and str(live) else fallback_version
    return Autopsy(
        alert_id=alert.alert_id,
        account=alert.account,
        as_of=alert.as_of,
        severity=alert.severity,
        trigger=Trigger(
            rule=alert.rule,
            value=alert.value,
            threshold=alert.threshold,
            window_start=alert.window_start,
            message=alert.message,
        ),
        metrics=metrics,
        diagnostics=Diagnostics(
            module=module,
            strategy_version=version,
            root_cause=cause,
            execution_log=execution_log,
            evidence=evidence,
            findings=findings,
        ),
        mandate=mandate,
        constraints=constraints,
    )
