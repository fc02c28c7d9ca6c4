"""The report's tables as labelled rows, shared by the HTML, Markdown and PNG renderers.

Each table is a `Grid`: a header and rows of `Cell`s. A cell's text is already formatted with its
unit. Its `hint` is the glossary definition, shown on hover (HTML) or in the glossary (Markdown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from oomrl.metrics.labels import format_value, label

KEY_FIGURES = (
    "cumulative_return",
    "annualized_return",
    "cagr",
    "volatility",
    "sharpe",
    "sortino",
    "max_drawdown",
    "calmar",
    "tracking_error",
    "information_ratio",
    "beta",
    "alpha_annualized",
    "alpha_tstat_hac",
    "r_squared",
    "trading_days",
)
PHASE_ROWS = (
    "sessions",
    "annualized_return",
    "benchmark_annualized_return",
    "excess_return",
    "cagr",
    "cumulative_return",
    "volatility",
    "sharpe",
    "max_drawdown",
    "information_ratio",
)
FRICTION_ROWS = (
    "sessions",
    "rebalances",
    "turnover",
    "turnover_annualized",
    "turnover_per_rebalance",
    "costs_total",
    "cost_drag",
    "commission",
    "stamp_duty",
    "transfer_fee",
    "impact_cost",
    "slippage_leakage",
    "slippage_leakage_annualized",
    "fills",
    "adv_participation_mean",
    "adv_participation_max",
    "fills_over_cap",
    "reward_total",
)


@dataclass(frozen=True)
class Cell:
    """One formatted cell; `hint` explains it, `tone` is a signed intensity for heat colouring."""

    text: str
    hint: str = ""
    tone: float | None = None


@dataclass
class Grid:
    """A table ready to render: header cells, rows of cells, and the glossary keys it uses."""

    header: list[Cell]
    rows: list[list[Cell]]
    keys: set[str] = field(default_factory=set)
    row_headers: bool = True  # the first column names the row


def key_cell(key: str) -> Cell:
    """A row or column title: the label with its unit, the definition as hint."""
    entry = label(key)
    return Cell(entry.heading, entry.definition)


def key_figures(
    metrics: dict[str, float | int | None],
    benchmark: dict[str, float | int | None] | None,
    benchmark_name: str,
) -> Grid:
    """Metric | Portfolio | CSI 300 (the benchmark's own figures where they mean something)."""
    keys = [k for k in KEY_FIGURES if k in metrics]
    header = [Cell("Metric"), Cell("Portfolio")] + (
        [Cell(benchmark_name)] if benchmark is not None else []
    )
    rows = []
    for key in keys:
        row = [key_cell(key), Cell(format_value(key, metrics[key]))]
        if benchmark is not None:
            row.append(Cell(format_value(key, benchmark[key]) if key in benchmark else ""))
        rows.append(row)
    return Grid(header, rows, set(keys))


def transposed(
    table: pd.DataFrame,
    name_column: str,
    keys: Sequence[str],
    span: tuple[str, str] | None = ("start", "end"),
) -> Grid:
    """Rows of `table` (one per version) become columns; `keys` become labelled rows.

    Narrow by design: a handful of versions fit a laptop screen however many metrics there are."""
    shown = [k for k in keys if k in table.columns]
    header = [Cell("")] + [Cell(str(name)) for name in table[name_column].tolist()]
    rows = []
    if span and set(span) <= set(table.columns):
        rows += [
            [Cell("From", "First session")] + [Cell(str(v)) for v in table[span[0]].tolist()],
            [Cell("To", "Last session")] + [Cell(str(v)) for v in table[span[1]].tolist()],
        ]
    rows += [[key_cell(k)] + [Cell(format_value(k, v)) for v in table[k].tolist()] for k in shown]
    return Grid(header, rows, set(shown))


def plain(
    table: pd.DataFrame, keys: Sequence[str] | None = None, row_headers: bool = False
) -> Grid:
    """A table as it is, with labelled column headers."""
    columns = list(keys) if keys is not None else [str(c) for c in table.columns]
    header = [key_cell(c) if label(c).definition else Cell(c.replace("_", " ")) for c in columns]
    rows = [
        [Cell(format_value(c, record[c])) for c in columns] for record in table.to_dict("records")
    ]
    return Grid(header, rows, {c for c in columns if label(c).definition}, row_headers)


def monthly(table: pd.DataFrame) -> Grid:
    """Year × month returns with heat tones (±1 at the largest absolute month)."""
    months = [c for c in table.columns if c != "Year"]
    scale = float(table[months].abs().max().max() or 0.0) or 1.0
    header = (
        [Cell("Year")] + [Cell(m) for m in months] + [Cell("Year", "Compounded return of the year")]
    )
    rows = []
    for year, record in table.iterrows():
        cells = [Cell(str(year))]
        for column in months:
            value = record[column]
            cells.append(
                Cell(
                    format_value("portfolio", value), tone=None if pd.isna(value) else value / scale
                )
            )
        cells.append(Cell(format_value("portfolio", record["Year"])))
        rows.append(cells)
    return Grid(header, rows, {"portfolio"})


def two_alphas(metrics: dict[str, float | int | None], attribution: object | None) -> Grid | None:
    """CAPM alpha vs pure idiosyncratic alpha, side by side, with what each controls for."""
    if attribution is None or "alpha_annualized" not in metrics:
        return None
    regression = attribution.regression  # type: ignore[attr-defined]
    decomposition = attribution.decomposition  # type: ignore[attr-defined]
    header = [
        Cell(""),
        Cell("CAPM alpha", label("alpha_annualized").definition),
        Cell(
            "Pure idiosyncratic alpha",
            "Intercept × 252 of the regression on the CSI 300 and the Liquidity, Momentum and "
            "Volatility High-Low factors: return left after market and style exposures.",
        ),
    ]
    rows = [
        [
            Cell("Regressed on"),
            Cell("CSI 300 excess return"),
            Cell("CSI 300 + liquidity, momentum, volatility factors"),
        ],
        [
            Cell("Alpha (% a year)"),
            Cell(format_value("alpha_annualized", metrics["alpha_annualized"])),
            Cell(format_value("alpha_annualized", decomposition["alpha"])),
        ],
        [
            Cell("t-stat (Newey-West)"),
            Cell(format_value("alpha_tstat_hac", metrics.get("alpha_tstat_hac"))),
            Cell(format_value("t_hac", float(regression.tstats_hac["const"]))),
        ],
        [
            Cell(
                "Style return (% a year)",
                "Return the style tilts explain: Σ factor coefficient × factor mean return × 252.",
            ),
            Cell("inside alpha"),
            Cell(format_value("annual", decomposition["style_return"])),
        ],
        [
            Cell("R²"),
            Cell(format_value("r_squared", metrics.get("r_squared"))),
            Cell(format_value("r_squared", regression.r_squared)),
        ],
        [
            Cell("Sessions"),
            Cell(format_value("trading_days", metrics.get("trading_days"))),
            Cell(format_value("trading_days", int(regression.nobs))),
        ],
    ]
    return Grid(header, rows, {"alpha_annualized", "alpha_tstat_hac", "r_squared"})


TWO_ALPHAS_NOTE = (
    "CAPM alpha credits the portfolio with everything the CSI 300 does not explain, "
    "including returns "
    "that merely come from tilting towards liquid, trending or volatile stocks. Pure idiosyncratic "
    "alpha also removes those style tilts, so it is the skill left after paying for known "
    "risk premia. "
    "When CAPM alpha is positive and pure alpha is not, the outperformance was style exposure, not "
    "stock selection. (Pure alpha's sample starts once the factors have 20 sessions of history.)"
)
