"""The report's records, read by the tearsheet and each of its renderers.

ReportInputs is what a report is about. Report is where it went, with every table it shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from oomrl.metrics.factors import StyleAttribution
from oomrl.metrics.friction import Friction
from oomrl.metrics.marks import Mark
from oomrl.metrics.performance import Phase


@dataclass
class ReportInputs:
    """What a report is about, beyond the returns: account ledger facts and labels."""

    title: str = "Portfolio"
    benchmark_kind: str = "price"
    rf: float = 0.0
    phases: list[Phase] | None = None
    attribution: StyleAttribution | None = None
    friction: Friction | None = None
    marks: list[Mark] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Report:
    """Where the report went and every table it shows."""

    html: Path
    markdown: Path
    pngs: list[Path]
    metrics: dict[str, float | int | None]
    benchmark_metrics: dict[str, float | int | None] | None = None
    phases: pd.DataFrame | None = None
    style: pd.DataFrame | None = None
    style_split: pd.DataFrame | None = None
    attribution: StyleAttribution | None = None
    monthly: pd.DataFrame | None = None
    yearly: pd.DataFrame | None = None
    drawdowns: pd.DataFrame | None = None
    friction: Friction | None = None
    marks: list[Mark] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Shown above the figures: windows too short to annualize
    caveats: list[str] = field(default_factory=list)
    title: str = "Portfolio"
    benchmark_label: str = "none"
    span: str = ""
    rf: float = 0.0
    summary_png: Path | None = None

    def paths(self) -> list[Path]:
        extra = [self.summary_png] if self.summary_png else []
        return [self.html, self.markdown, *extra, *self.pngs]
