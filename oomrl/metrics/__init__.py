"""Performance, attribution and reports of a daily return series against the CSI 300."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.metrics.attribution import (
        account_marks,
        account_report,
        account_returns,
        benchmark_returns,
        report_dir,
        store_style_factors,
        universe_panel,
        version_labels,
        version_rewards,
    )
    from oomrl.metrics.friction import account_friction, friction_by_version, friction_row
    from oomrl.metrics.io import (
        align,
        read_returns_csv,
        returns_from_levels,
        validate_returns,
        window,
    )
    from oomrl.metrics.labels import GLOSSARY, format_value, label
    from oomrl.metrics.marks import Mark, probation_marks, promotion_marks, repair_marks
    from oomrl.metrics.performance import (
        METRIC_KEYS,
        PERIODS_PER_YEAR,
        ROLLING_IR_WINDOW,
        Phase,
        compute_metrics,
        information_ratio,
        max_drawdown,
        phases_from_versions,
        read_phases,
        rolling_information_ratio,
    )
    from oomrl.metrics.periods import drawdown_periods, monthly_returns, yearly_returns
    from oomrl.metrics.regression import newey_west_maxlags, ols
    from oomrl.metrics.report import Report
    from oomrl.metrics.short_window import MIN_ANNUALIZED_SESSIONS, too_short, without_annualized
    from oomrl.metrics.tearsheet import build_report
    from oomrl.metrics.tearsheet_md import grid_markdown

__all__ = [
    "GLOSSARY",
    "METRIC_KEYS",
    "MIN_ANNUALIZED_SESSIONS",
    "PERIODS_PER_YEAR",
    "ROLLING_IR_WINDOW",
    "Mark",
    "Phase",
    "Report",
    "account_friction",
    "account_marks",
    "account_report",
    "account_returns",
    "align",
    "benchmark_returns",
    "build_report",
    "compute_metrics",
    "drawdown_periods",
    "format_value",
    "friction_by_version",
    "friction_row",
    "grid_markdown",
    "information_ratio",
    "label",
    "max_drawdown",
    "monthly_returns",
    "newey_west_maxlags",
    "ols",
    "phases_from_versions",
    "probation_marks",
    "promotion_marks",
    "read_phases",
    "read_returns_csv",
    "repair_marks",
    "report_dir",
    "returns_from_levels",
    "rolling_information_ratio",
    "store_style_factors",
    "too_short",
    "universe_panel",
    "validate_returns",
    "version_labels",
    "version_rewards",
    "window",
    "without_annualized",
    "yearly_returns",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)
