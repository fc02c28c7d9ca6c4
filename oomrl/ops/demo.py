"""`oomrl demo`: the whole OOM-RL loop offline on the bundled real sample, with visible progress.

Week by week the account trades its active strategy version on the paper broker. At each week's
last session the loss diagnostics run. A new alert of the chosen severity starts a STDAW repair
(offline provider, mandate auto-approved). A repaired version goes on probation for `--probation N`
sessions; with 0 it takes the capital at once. It trades a shadow book forward, session by session.
The daily chain's decision logic promotes it or retires it. Promoted, the account trades it from
its next rebalance. No repair of the account starts while a probation is open.

At the end it shows Table 1 per strategy version (from when the capital moved). It shows the
tearsheet (probations marked), and where everything was written.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.errors import OomrlError
from oomrl.ops.demo_probation import ProbationSessions, probation_log
from oomrl.repair.endings import ending_name
from oomrl.settings import OomrlSettings, get_settings

if TYPE_CHECKING:
    from oomrl.portfolio.hosting import StrategyRunner
    from oomrl.portfolio.market import MarketFrames
    from oomrl.portfolio.setup import RebalanceSetup
    from oomrl.repair.probation import Probation

DEMO_ACCOUNT = "demo"
# The daily chain's default (OOMRL_AGENT_PROBATION_SESSIONS), never read from the env here
PROBATION_SESSIONS = 20
SEVERITY_RANK = {"warning": 1, "critical": 2}
# "friction": the slippage-leakage alert (the paper's friction shock) or anything critical.
REPAIR_POLICIES = ("friction", "critical", "warning")
FRICTION_RULES = frozenset({"execution_decay"})
TABLE1_COLUMNS = [
    ("trading_days", "days"),
    ("cumulative_return", "return"),
    ("annualized_return", "ann. return"),
    ("benchmark_annualized_return", "CSI 300"),
    ("sharpe", "Sharpe"),
    ("max_drawdown", "max DD"),
    ("information_ratio", "IR"),
    ("beta", "beta"),
    ("alpha_annualized", "alpha"),
    ("reward", "reward Σ"),
]
# Printed as percentages
PERCENT_COLUMNS = frozenset(
    {
        "cumulative_return",
        "annualized_return",
        "benchmark_annualized_return",
        "max_drawdown",
        "alpha_annualized",
    }
)


@dataclass
class DemoConfig:
    """What the demo replays and when it repairs."""

    home: Path
    start: date = date(2024, 7, 1)
    end: date = date(2026, 2, 27)
    strategy: str = "daily_momentum"
    account: str = DEMO_ACCOUNT
    repair_on: Literal["friction", "critical", "warning"] = "friction"
    max_repairs: int = 2
    cooldown_weeks: int = 4  # weeks a promoted version trades before its alerts may start a repair.
    # Forward sessions a repaired version trades a shadow book first (0: none).
    probation_sessions: int = PROBATION_SESSIONS
    lock: str = "namespace"
    provider: str = "offline"


class DemoAlert(BaseModel):
    """A new alert the weekly diagnostics raised."""

    as_of: str
    severity: str
    rule: str
    alert_id: str


class DemoRepair(BaseModel):
    """How one repair the demo started ended (a `RepairOutcome`, cut to what `demo.json` keeps)."""

    alert_id: str
    as_of: str
    status: str
    step: str | None = None
    reason: str = ""
    run_dir: str
    version: str | None = None


class DemoRefusal(BaseModel):
    """A rebalance refused because the version's decision was invalid (fail closed)."""

    date: str
    version: str
    error: str


@dataclass
class DemoLog:
    """What happened, for the summary file and the caller."""

    alerts: list[DemoAlert] = field(default_factory=list)
    repairs: list[DemoRepair] = field(default_factory=list)
    halted_on: str | None = None
    rebalances: int = 0
    probations: list[Probation] = field(default_factory=list)  # from the ledger, at the end
    refused: list[DemoRefusal] = field(default_factory=list)
    jails: list[str] = field(default_factory=list)  # where the versions' strategy code ran


class DemoSummary(BaseModel):
    """What the demo produced; `demo.json` is its dump without `demo_json` (the file's own path)."""

    account: str
    strategy: str
    start: str
    end: str
    rebalances: int
    halted_on: str | None
    refused: list[DemoRefusal]
    jails: list[str]
    alerts: list[DemoAlert]
    repairs: list[DemoRepair]
    probations: list[dict[str, Any]]
    table1: list[dict[str, Any]]
    tearsheet: str
    summary_md: str
    table1_csv: str
    home: str
    demo_json: str


def _day(value: Any) -> str:
    return "—" if value is None else str(value)[:10]


def stage_market_data(settings: OomrlSettings, console: Console) -> Any:
    """Ingest the bundled sample into OOMRL_HOME/data (once) and show what is stored."""
    from oomrl.data.sample import ensure_sample

    with console.status("ingesting the bundled real sample (data/sample) ..."):
        store = ensure_sample(settings)
    summary = store.bar_summary()
    index = store.read_index()
    members = store.read_membership()
    table = Table(title=f"Market data in {settings.store.data_dir}")
    for column, justify in (("dataset", "left"), ("rows", "right"), ("coverage", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_row(
        "daily bars",
        f"{summary['rows']:,}",
        f"{summary['symbols']} symbols, {_day(summary['first_date'])} → "
        f"{_day(summary['last_date'])}",
    )
    table.add_row(
        "CSI 300 (000300)",
        f"{len(index):,}",
        f"{_day(index.index.min())} → {_day(index.index.max())}" if len(index) else "—",
    )
    table.add_row(
        "membership",
        f"{len(members):,}",
        f"{members['effective_date'].nunique()} snapshots" if len(members) else "—",
    )
    console.print(table)
    return store


def fresh_state(settings: OomrlSettings) -> None:
    """Start the demo account from scratch: its ledger and workspace go, the market data stays."""
    (settings.store.home / "ledger.db").unlink(missing_ok=True)
    shutil.rmtree(settings.store.workspace_dir, ignore_errors=True)


def weeks_between(start: date, end: date) -> list[list[date]]:
    """XSHG sessions in [start, end], grouped by ISO week."""
    from oomrl.market import calendar

    grouped: dict[tuple[int, int], list[date]] = {}
    for session in calendar.sessions(pd.Timestamp(start), pd.Timestamp(end)):
        grouped.setdefault(calendar.week_key(session), []).append(session.date())
    if not grouped:
        raise OomrlError(f"no XSHG sessions between {start} and {end}")
    return list(grouped.values())


def pick_alert(autopsies: list[Any], policy: str) -> Any | None:
    """The new alert that should start a repair under `policy` (most severe first), or None."""

    def eligible(autopsy: Any) -> bool:
        if policy == "friction":
            return autopsy.trigger.rule in FRICTION_RULES or autopsy.severity == "critical"
        return SEVERITY_RANK[autopsy.severity] >= SEVERITY_RANK[policy]

    chosen = [a for a in autopsies if eligible(a)]
    return max(chosen, key=lambda a: SEVERITY_RANK[a.severity]) if chosen else None


def run_repair_inline(settings: OomrlSettings, config: DemoConfig, autopsy: Autopsy) -> DemoRepair:
    """One STDAW repair in this process: offline provider, mandate auto-approved."""
    from oomrl.repair import loop as domain

    ctx = domain.open_context(
        settings,
        autopsy,
        provider=config.provider,
        account=config.account,
        lock=config.lock,
        probation=config.probation_sessions,
    )
    outcome = domain.run_repair(
        autopsy,
        ctx,
        lambda mandate: domain.Decision(action="approve", reason="auto-approved by `oomrl demo`"),
    )
    return DemoRepair(
        alert_id=autopsy.alert_id,
        as_of=autopsy.as_of.isoformat(),
        status=outcome.status,
        step=outcome.step,
        reason=outcome.reason,
        run_dir=outcome.run_dir,
        version=outcome.version.tag if outcome.version else None,
    )


Repairer = Callable[[OomrlSettings, DemoConfig, Autopsy], DemoRepair]


class ActiveVersion:
    """The runner of the version trading now.

    One strategy host is kept across the weekly rebalances. It is replaced when another version
    becomes active.
    """

    def __init__(self) -> None:
        self.version: str | None = None
        self.open: StrategyRunner | None = None  # the runner of `version`

    def runner(self, version: str, setup: RebalanceSetup, market: MarketFrames) -> StrategyRunner:
        """The open runner of `version` on `market`; the previous version's host is stopped."""
        if self.version != version or self.open is None:
            self.close()
            self.open = setup.strategy.open(setup.params, market)
            self.version = version
        return self.open

    def close(self) -> None:
        if self.open is not None:
            self.open.close()
        self.open = None

    def __enter__(self) -> ActiveVersion:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay_weeks(
    settings: OomrlSettings,
    config: DemoConfig,
    store: Any,
    console: Console,
    repairer: Repairer = run_repair_inline,
) -> DemoLog:
    """The outer loop, one ISO week at a time: trade, diagnose, repair, promote."""
    from oomrl.diagnostics.diagnose import diagnose
    from oomrl.metrics.attribution import benchmark_returns
    from oomrl.portfolio.market import MarketFrames
    from oomrl.portfolio.rebalance import HISTORY_DAYS, load_panels, rebalance, session_index
    from oomrl.portfolio.service import membership, open_ledger
    from oomrl.portfolio.setup import market_rules, rebalance_setup
    from oomrl.repair import promotion
    from oomrl.repair.trading import resolve_strategy
    from oomrl.repair.versions import StrategyVersions

    ledger = open_ledger(settings)
    ledger.open_account(config.account, settings.ledger.initial_cash)
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    promotion.open_workspace(versions)
    versions.activate("v1", config.account, config.strategy)
    panels = load_panels(
        store, config.end, history_days=(config.end - config.start).days + HISTORY_DAYS
    )
    # Once: every version trades this market
    market = MarketFrames.build(panels, market_rules(settings))
    benchmark = benchmark_returns(store, "price")
    members = membership(store)  # point-in-time CSI 300: the demo trades only members on the day
    weeks = weeks_between(config.start, config.end)
    log, last_promotion, told_budget = DemoLog(), -config.cooldown_weeks, False
    trading = ActiveVersion()
    shadows = ProbationSessions(settings, config.account, store, market, console)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with trading, Progress(*columns, console=console) as progress:
        bar = progress.add_task("replaying weeks", total=len(weeks))
        for number, week in enumerate(weeks):
            resolved = resolve_strategy(settings, ledger, config.account)
            setup = rebalance_setup(resolved.strategy, resolved.version, settings, members)
            for day in week:
                final = day == weeks[-1][-1]  # book the window's last session, due or not
                try:
                    runner = trading.runner(resolved.version, setup, market)
                    t = session_index(market, day)
                    due = final or runner.due(t, ledger.account(config.account).last_date)
                    outcome = (
                        rebalance(ledger, config.account, day, market, setup, runner=runner)
                        if due
                        else None
                    )
                # A version whose decision is invalid trades nothing (fail closed)
                except OomrlError as exc:
                    if not any(item.version == resolved.version for item in log.refused):
                        console.print(
                            f"[red]{day} rebalance refused[/] ({resolved.version[:8]}): {exc} — "
                            "this version trades nothing until it is replaced"
                        )
                    log.refused.append(
                        DemoRefusal(date=day.isoformat(), version=resolved.version, error=str(exc))
                    )
                    outcome = None
                if outcome is not None:
                    log.rebalances += 1
                    if runner.jail not in log.jails:
                        log.jails.append(runner.jail)
                    if outcome.halted:
                        log.halted_on = day.isoformat()
                        break
                # The daily chain's probation step, after the account's own session (as in
                # flows/chain.py).
                decided, halted = shadows.session(day)
                if halted is not None:
                    log.halted_on = halted.isoformat()
                    break
                if any(done.probation.status == "promoted" for done in decided):
                    last_promotion = number  # the capital moved: the cool-down counts from here
                    resolved = resolve_strategy(settings, ledger, config.account)
                    setup = rebalance_setup(resolved.strategy, resolved.version, settings, members)
            progress.update(
                bar,
                advance=1,
                description=f"week of {week[0]} · {resolved.name} {resolved.version[:8]}",
            )
            new = diagnose(
                ledger,
                config.account,
                week[-1],
                benchmark=benchmark,
                log_dir=settings.store.runs_dir / "demo-execution-logs",
            )
            for autopsy in new:
                log.alerts.append(
                    DemoAlert(
                        as_of=str(autopsy.as_of),
                        severity=autopsy.severity,
                        rule=autopsy.trigger.rule,
                        alert_id=autopsy.alert_id,
                    )
                )
                console.print(
                    f"[yellow]alert[/] {autopsy.as_of} {autopsy.severity:<8} "
                    f"{autopsy.trigger.message}"
                )
            if log.halted_on:
                console.print(
                    f"[red]account halted on {log.halted_on}[/]: the kill switch wins; "
                    "a person must resume it (`oomrl account resume`)"
                )
                break
            chosen = pick_alert(new, config.repair_on)
            if chosen is None:
                continue
            if len(log.repairs) >= config.max_repairs:
                # Say it once: the alerts that follow are still diagnosed and stored
                if not told_budget:
                    console.print(
                        f"[yellow]no more repairs[/]: --max-repairs {config.max_repairs} reached; "
                        "later alerts are diagnosed and recorded in the ledger, not repaired "
                        "(raise --max-repairs to let them start repairs)"
                    )
                    told_budget = True
                continue
            running = shadows.running()
            if running:  # one challenger per account: the domain refuses a second probation
                console.print(
                    f"[yellow]repair deferred[/] for alert {chosen.alert_id[:12]} "
                    f"({chosen.trigger.rule}): {running[0].tag} is on probation since "
                    f"{running[0].opened_on}; no repair of the account starts before it is decided"
                )
                continue
            if number - last_promotion < config.cooldown_weeks:
                console.print(
                    f"[yellow]repair deferred[/] for alert {chosen.alert_id[:12]} "
                    f"({chosen.trigger.rule}): the version promoted {number - last_promotion} "
                    f"week(s) ago trades {config.cooldown_weeks} weeks before its alerts may start "
                    "a repair"
                )
                continue
            console.print(
                f"[cyan]repair[/] for alert {chosen.alert_id[:12]} ({chosen.trigger.rule}): "
                f"{chosen.mandate}"
            )
            progress.update(
                bar, description=f"repairing after {chosen.as_of} (STDAW, offline provider)"
            )
            result = repairer(settings, config, chosen)
            log.repairs.append(result)
            style = "green" if result.status in ("promoted", "probation") else "red"
            # The name a flow run's state has
            step = f" at {result.step}" if result.step else ""
            console.print(
                f"[{style}]repair {ending_name(result.status, result.step)}[/]{step}: "
                f"{result.reason}"
            )
            if result.status == "promoted":
                last_promotion = number
    return log


def version_phases(
    settings: OomrlSettings,
    config: DemoConfig,
    returns_index: pd.DatetimeIndex,
    live_versions: pd.Series,
) -> list[Any]:
    """One phase per contiguous span of a version, named by its tag and strategy."""
    from oomrl.metrics.performance import phases_from_versions
    from oomrl.repair.versions import StrategyVersions

    names = {
        info.sha: f"{info.tag} {info.strategy or config.strategy}"
        for info in StrategyVersions(settings.store.workspace_dir).list()
    }
    phases = phases_from_versions(live_versions.reindex(returns_index))
    full = {sha[:12]: name for sha, name in names.items()}
    return [
        type(phase)(full.get(phase.name, phase.name), phase.start, phase.end) for phase in phases
    ]


def table1(
    returns: pd.Series, benchmark: pd.Series, phases: list[Any], nav: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The paper's Table 1: per version, and for the whole window; with the reward (Eq. 1-2) per
    span."""
    from oomrl.metrics.attribution import version_rewards
    from oomrl.metrics.performance import Phase, compute_metrics
    from oomrl.metrics.short_window import without_annualized

    rows = []
    spans = [*phases, Phase("whole window", returns.index[0], returns.index[-1])]
    rewards = version_rewards(nav, spans) if nav is not None and "reward" in nav else {}
    for span in spans:
        part = returns.loc[span.start : span.end]
        metrics = compute_metrics(part, benchmark) if len(part) > 2 else {"trading_days": len(part)}
        metrics = without_annualized(
            {
                **metrics,
                "cumulative_return": float((1.0 + part).prod() - 1.0),
                "reward": rewards.get(span.name),
            },
            len(part),
        )
        rows.append(
            {
                "version": span.name,
                "start": part.index[0].date().isoformat(),
                "end": part.index[-1].date().isoformat(),
                **{key: metrics.get(key) for key, _ in TABLE1_COLUMNS},
            }
        )
    return pd.DataFrame(rows)


def print_table1(frame: pd.DataFrame, console: Console) -> None:
    """Table 1 with rich: percentages for returns and drawdown, ratios to two decimals.

    A span too short to annualize shows — and a line saying so.
    """
    from oomrl.metrics.short_window import MIN_ANNUALIZED_SESSIONS, too_short

    table = Table(title="Table 1 — performance per strategy version (vs CSI 300 price index)")
    for column in ("version", "span"):
        table.add_column(column)
    for _, label in TABLE1_COLUMNS:
        table.add_column(label, justify="right")
    for row in frame.to_dict("records"):
        cells = []
        for key, _ in TABLE1_COLUMNS:
            value = row[key]
            if value is None or (isinstance(value, float) and pd.isna(value)):
                cells.append("—")
            elif key == "trading_days":
                cells.append(str(int(value)))
            else:
                cells.append(f"{value:.2%}" if key in PERCENT_COLUMNS else f"{value:.2f}")
        table.add_row(row["version"], f"{row['start']} → {row['end']}", *cells)
    console.print(table, width=max(console.width, 150))
    short = [row["version"] for row in frame.to_dict("records") if too_short(row["trading_days"])]
    if short:
        console.print(
            f"— : {', '.join(short)} traded fewer than {MIN_ANNUALIZED_SESSIONS} sessions, "
            "too short "
            "to annualize (ann. return, CSI 300, Sharpe, IR and alpha are left out; return is over "
            "the span)"
        )


def write_reports(
    settings: OomrlSettings, config: DemoConfig, store: Any, log: DemoLog, console: Console
) -> DemoSummary:
    """Table 1 (printed, CSV, markdown), the tearsheet, and a JSON summary of the run."""
    from oomrl.metrics.attribution import (
        account_report,
        account_returns,
        benchmark_returns,
        report_dir,
    )
    from oomrl.portfolio.service import open_ledger
    from oomrl.repair.versions import StrategyVersions

    ledger = open_ledger(settings)
    log.probations = probation_log(settings, config.account)
    nav = ledger.nav_frame(config.account)
    returns, live_versions = account_returns(nav, config.account)
    benchmark = benchmark_returns(store, "price")
    phases = version_phases(settings, config, returns.index, live_versions)
    frame = table1(returns, benchmark, phases, nav)
    print_table1(frame, console)
    out = report_dir(settings.store.runs_dir, f"demo-{config.account}")
    with console.status("writing the tearsheet ..."):
        report = account_report(
            ledger,
            store,
            config.account,
            out,
            phases=phases,
            workspace=StrategyVersions(settings.store.workspace_dir),
            runs_dir=settings.store.runs_dir,
        )
    frame.to_csv(out / "table1.csv", index=False)
    (out / "table1.md").write_text(frame.to_markdown(index=False, floatfmt=".4f") + "\n")
    summary = DemoSummary(
        account=config.account,
        strategy=config.strategy,
        start=str(config.start),
        end=str(config.end),
        rebalances=log.rebalances,
        halted_on=log.halted_on,
        refused=log.refused,
        jails=log.jails,
        alerts=log.alerts,
        repairs=log.repairs,
        probations=[trial.summary() for trial in log.probations],
        table1=frame.to_dict("records"),
        tearsheet=str(report.html),
        summary_md=str(report.markdown),
        table1_csv=str(out / "table1.csv"),
        home=str(settings.store.home),
        demo_json=str(out / "demo.json"),
    )
    # Python-mode dump: the same keys and values (NaN, numpy scalars) the file always had
    document = summary.model_dump(exclude={"demo_json"})
    (out / "demo.json").write_text(json.dumps(document, indent=2, default=str))
    return summary


def run_demo(
    home: Path | None = None,
    start: str = "2024-07-01",
    end: str = "2026-02-27",
    strategy: str = "daily_momentum",
    console: Console | None = None,
    repair_on: str = "friction",
    max_repairs: int = 2,
    lock: str = "namespace",
    repairer: Repairer = run_repair_inline,
    probation: int = PROBATION_SESSIONS,
) -> DemoSummary:
    """Run the demo in its own OOMRL_HOME (default: <OOMRL_HOME>/demo); returns what it produced."""
    # Logs and CI are not terminals: give Table 1 room instead of rich's 80-column default.
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    base = get_settings()
    demo_home = Path(home).expanduser().resolve() if home else base.store.home / "demo"
    # The demo's own SQLite ledger, whatever OOMRL_LEDGER_URL says: it starts from scratch each
    # time.
    settings = get_settings(
        store={"home": demo_home}, ledger={"url": f"sqlite:///{demo_home / 'ledger.db'}"}
    )
    settings.store.ensure_dirs()
    if repair_on not in REPAIR_POLICIES:
        raise OomrlError(
            f"--repair-on must be one of {', '.join(REPAIR_POLICIES)}, got {repair_on!r}"
        )
    config = DemoConfig(
        home=demo_home,
        start=date.fromisoformat(start),
        end=date.fromisoformat(end),
        strategy=strategy,
        repair_on=repair_on,  # type: ignore[arg-type]
        max_repairs=max_repairs,
        lock=lock,
        probation_sessions=probation,
    )
    if probation < 0:
        raise OomrlError(
            f"--probation must be 0 (a repaired version takes the capital at once) or more "
            f"sessions, got {probation}"
        )
    if config.start >= config.end:
        raise OomrlError(f"--start {start} must be before --end {end}")
    console.rule(f"oomrl demo — {strategy} from {start} to {end}, offline, in {demo_home}")
    store = stage_market_data(settings, console)
    fresh_state(settings)
    log = replay_weeks(settings, config, store, console, repairer)
    summary = write_reports(settings, config, store, log, console)
    from oomrl.portfolio.hosting import UNSAFE_JAIL

    if UNSAFE_JAIL in log.jails:
        console.print(f"[red]strategy code ran unjailed[/]: jail {UNSAFE_JAIL}")
    if log.refused:
        console.print(
            f"[red]{len(log.refused)} rebalance(s) refused[/] (invalid decisions are never "
            "traded); "
            f"first on {log.refused[0].date}: see {summary.demo_json}"
        )
    console.rule("reports")
    for label, path in (
        ("tearsheet", summary.tearsheet),
        ("summary", summary.summary_md),
        ("Table 1", summary.table1_csv),
        ("run log", summary.demo_json),
    ):
        console.print(f"{label:>10}: {path}")
    for repair in log.repairs:
        console.print(
            f"{'repair':>10}: {repair.run_dir} ({ending_name(repair.status, repair.step)})"
        )
    for trial in log.probations:
        console.print(
            f"{'probation':>10}: {trial.tag} on {trial.shadow} from {trial.opened_on}, "
            f"{trial.status}"
            + (f" on {trial.decided_on} by {trial.decided_by}" if trial.decided_on else "")
        )
    console.rule("inspect the demo's state")
    for line in inspect_commands(settings.store.home, config.account):
        console.print(line, soft_wrap=True)
    return summary


def inspect_commands(home: Path, account: str) -> list[str]:
    """How to look at what the demo left in its own OOMRL_HOME.

    The next demo run starts it afresh.
    """
    steps = [
        (f"versions list --account {account}", "v1, the promoted versions, * = active"),
        ("versions show v2", "a promotion's autopsy, diffs, verdicts"),
        (f"account show --account {account}", "cash, positions, last NAV rows"),
        (f"report --account {account}", "the tearsheet again, as of now"),
    ]
    width = max(len(command) for command, _ in steps)
    return [
        *(f"OOMRL_HOME={home} oomrl {command:<{width}}  # {why}" for command, why in steps),
        "(the demo's ledger and workspace are replaced by the next `oomrl demo`; the "
        "market data stays)",
    ]
