"""Champion / challenger: a repaired version trades a shadow book before it takes the capital.

A repair that passes cross-validation opens a probation (`open_probation`, the promotion's commit
point). That is a shadow paper account `<account>~<tag>` with the champion's NAV in cash. It has
the same rules and the kill switch. It trades the challenger from the first session after the
repair. The daily chain trades it on the challenger's own schedule (`advance_shadows`). It marks it
beside the champion.

After `sessions` forward sessions, `decide_due` judges it. It judges at once when the kill switch
halts the shadow. It judges those sessions only, net of friction. It checks every constraint of its
mandate. It checks the promotion rule (oomrl.repair.crossval.PromotionRule) against the champion.
Promoted, the account trades the challenger. Retired, the shadow closes. An autopsy of the forward
sessions (rule `probation_retired`) is then recorded as the account's alert. The next repair reads
it. A person may decide early (`decide_now`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel

from oomrl.diagnostics.autopsy import Autopsy
from oomrl.diagnostics.mandate import Constraints
from oomrl.errors import ProbationError
from oomrl.names import ACCOUNT_MAX
from oomrl.portfolio.killswitch import AccountStatus
from oomrl.portfolio.ledger import AlertRow, Ledger
from oomrl.portfolio.market import MarketFrames
from oomrl.portfolio.replay import ReplayResult
from oomrl.repair.crossval import (
    Check,
    PromotionRule,
    VersionMeasures,
    after_halt,
    constraint_checks,
    measure,
    not_worse,
)
from oomrl.settings import OomrlSettings

# No door accepts it in an account name (oomrl.names): nobody opens or repairs a shadow
SEPARATOR = "~"
OPEN: Final = "open"
PROMOTED: Final = "promoted"
RETIRED: Final = "retired"
RETIRED_RULE = "probation_retired"
Decision = Literal["promoted", "retired"]


@dataclass(frozen=True)
class Probation:
    """One challenger's forward trial, as the ledger holds it."""

    id: int
    account: str
    shadow: str
    tag: str
    sha: str
    strategy: str
    opened_on: date
    sessions: int
    status: str
    decided_on: date | None = None
    decided_by: str | None = None
    reason: str | None = None
    evidence: dict[str, Any] | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Probation:
        fields = {k: row[k] for k in cls.__dataclass_fields__ if k in row}
        fields["evidence"] = json.loads(row["evidence"]) if row.get("evidence") else None
        return cls(**fields)

    def summary(self) -> dict[str, Any]:
        """The probation for `demo.json`, flow results and events (the evidence table included)."""
        return {
            "id": self.id,
            "version": self.tag,
            "sha": self.sha,
            "account": self.account,
            "shadow": self.shadow,
            "strategy": self.strategy,
            "started": str(self.opened_on),
            "sessions": self.sessions,
            "status": self.status,
            "decided": str(self.decided_on) if self.decided_on else None,
            "decided_by": self.decided_by,
            "decision": self.status if self.status != OPEN else None,
            "reason": self.reason,
            "evidence": self.evidence,
        }


def shadow_name(account: str, tag: str) -> str:
    """`paper~v2`: the shadow book of `tag` on `account`.

    The account part is cut to fit the ledger's column.
    """
    suffix = f"{SEPARATOR}{tag}"
    return account[: ACCOUNT_MAX - len(suffix)] + suffix


def is_shadow(account: str) -> bool:
    return SEPARATOR in account


def probations(ledger: Ledger, account: str | None = None) -> list[Probation]:
    """Every probation (of `account`), oldest first."""
    return [Probation.of(row) for row in ledger.probations(account)]


def open_probations(ledger: Ledger, account: str | None = None) -> list[Probation]:
    return [p for p in probations(ledger, account) if p.status == OPEN]


def version_states(ledger: Ledger, account: str) -> dict[str, str]:
    """sha -> state of every version the account tried or trades: active, probation, retired."""
    states = {
        p.sha: {OPEN: "probation", RETIRED: "retired"}.get(p.status, "")
        for p in probations(ledger, account)
    }
    states = {sha: state for sha, state in states.items() if state}
    active = ledger.active_version(account)
    if active is not None:
        states[active] = "active"
    return states


def open_probation(
    ledger: Ledger, account: str, tag: str, sha: str, strategy: str, opened_on: date, sessions: int
) -> Probation:
    """Open the challenger's shadow book with the champion's capital, and record the probation.

    The capital is the champion's last NAV, else its cash. It is one transaction, the promotion's
    commit point.
    """
    if sessions < 1:
        raise ProbationError(f"a probation needs at least one forward session, got {sessions}")
    pending = open_probations(ledger, account)
    if pending:
        raise ProbationError(
            f"account {account!r} already has {pending[0].tag} on probation (since "
            f"{pending[0].opened_on}); promote or retire it first (`oomrl versions "
            f"promote|retire {pending[0].tag} --account {account}`)"
        )
    state = ledger.account(account) if account in ledger.account_names() else None
    nav = ledger.nav_frame(account)
    capital_fen = (
        round(float(nav["nav"].iloc[-1]) * 100)
        if len(nav)
        else (state.cash_fen if state is not None else 0)
    )
    if capital_fen <= 0:
        raise ProbationError(f"account {account!r} has no capital to give a shadow book")
    shadow = shadow_name(account, tag)
    ledger.open_probation(
        {
            "account": account,
            "shadow": shadow,
            "tag": tag,
            "sha": sha,
            "strategy": strategy,
            "opened_on": opened_on,
            "sessions": sessions,
        },
        capital_fen,
    )
    return next(p for p in probations(ledger, account) if p.shadow == shadow)


# -- evidence --------------------------------------------------------------------------------------
class ProbationEvidence(BaseModel):
    """The forward sessions of one probation: both books measured over them, every check, the
    verdict."""

    probation: int
    account: str
    version: str
    start: date | None
    end: date
    sessions_done: int
    sessions_needed: int
    rule: PromotionRule
    rows: list[VersionMeasures]
    checks: list[Check]
    navs: dict[str, float] = {}  # each book's NAV on its last forward session (CNY)

    @property
    def challenger_halted(self) -> bool:
        return any(c.name == "kill_switch" and not c.passed for c in self.checks)

    @property
    def ready(self) -> bool:
        """Enough forward sessions, or the challenger lost its capital (nothing left to wait
        for)."""
        return self.sessions_done >= self.sessions_needed or self.challenger_halted

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]

    def table(self) -> list[dict[str, Any]]:
        return [
            r.model_dump(mode="json", exclude={"dates", "returns", "checks"}) for r in self.rows
        ]

    def markdown(self) -> str:
        """Champion and challenger side by side, the checks and the sessions left."""
        by = {r.version: r for r in self.rows}
        lines = [
            f"# Probation of {self.version} on {self.account}",
            f"Forward sessions {self.start or '-'}..{self.end}: {self.sessions_done} of "
            f"{self.sessions_needed} ({max(self.sessions_needed - self.sessions_done, 0)} left). "
            f"Rule: {self.rule.describe()}.",
            "",
            "| | champion | challenger |",
            "|---|---:|---:|",
            "| NAV (CNY) | "
            + " | ".join(
                f"{self.navs[v]:,.0f}" if v in self.navs else "-"
                for v in ("champion", "challenger")
            )
            + " |",
        ]
        for label, key, fmt in (
            ("net return", "net_return", "{:+.2%}"),
            ("max drawdown", "max_drawdown", "{:.2%}"),
            ("costs / capital", "costs_fraction", "{:.3%}"),
            ("turnover", "turnover", "{:.2f}"),
            ("rebalances", "rebalances", "{}"),
            ("sessions", "trading_days", "{}"),
        ):
            cells = [
                fmt.format(getattr(by[v], key)) if v in by else "-"
                for v in ("champion", "challenger")
            ]
            lines.append(f"| {label} | {' | '.join(cells)} |")
        halts = [
            f"{v} halted by the kill switch on {by[v].halted_on}"
            for v in ("champion", "challenger")
            if v in by and by[v].halted_on
        ]
        lines += [
            "",
            *(f"- {h}" for h in halts),
            "",
            "| check | passed | detail |",
            "|---|---|---|",
        ]
        lines += [f"| {c.name} | {'yes' if c.passed else 'NO'} | {c.detail} |" for c in self.checks]
        return "\n".join(lines) + "\n"


def halted_on(ledger: Ledger, account: str) -> date | None:
    """The session the kill switch halted the account on, or None while it trades."""
    if ledger.account(account).status is not AccountStatus.HALTED:
        return None
    halts = [e["as_of"] for e in ledger.events(account) if e["kind"] == "halted" and e["as_of"]]
    return halts[-1] if halts else None


def book_result(
    ledger: Ledger, account: str, label: str, after: date, end: date, market: MarketFrames | None
) -> ReplayResult:
    """The ledger's record of one book over the sessions in (after, end].

    It is shaped as a replay's result.
    """
    nav = ledger.nav_frame(account)
    nav = nav[(nav["date"] > pd.Timestamp(after)) & (nav["date"] <= pd.Timestamp(end))].reset_index(
        drop=True
    )
    fills = ledger.fills_frame(account, after + timedelta(days=1), end)
    state = ledger.account(account)
    return ReplayResult(
        strategy=label,
        nav=nav,
        fills=fills,
        orders=pd.DataFrame(),
        initial_cash=state.initial_cash_fen / 100.0,
        halted_on=halted_on(ledger, account),
        max_weight=heaviest(ledger, account, nav, market),
    )


def heaviest(
    ledger: Ledger, account: str, nav: pd.DataFrame, market: MarketFrames | None
) -> pd.Series:
    """Largest position / NAV at the close of each session in `nav` that traded.

    It comes from the fills and corporate actions booked up to it. They are valued at the engine's
    mark prices.
    """
    if market is None or nav.empty:
        return pd.Series(dtype=float)
    fills = ledger.fills_frame(account)
    signed = fills["quantity"].where(fills["side"] == "buy", -fills["quantity"])
    moves = pd.concat(
        [
            pd.DataFrame({"date": fills["date"], "symbol": fills["symbol"], "delta": signed}),
            ledger.actions_frame(account)
            .rename(columns={"shares_delta": "delta"})
            .assign(date=lambda f: pd.to_datetime(f["date"]))[["date", "symbol", "delta"]],
        ]
    )
    found: dict[pd.Timestamp, float] = {}
    for _, row in nav[nav["turnover"] > 0].iterrows():
        day = pd.Timestamp(row["date"])
        held = moves[moves["date"] <= day].groupby("symbol")["delta"].sum()
        held = held[(held != 0) & held.index.isin(market.symbols)]
        if day not in market.dates or held.empty or row["nav"] <= 0:
            continue
        prices = market.mark_price[market.index_of(day)][market.symbols.get_indexer(held.index)]
        found[day] = float(np.max(held.to_numpy(dtype=float) * prices) / row["nav"])
    return pd.Series(found, dtype=float)


def idle(book: ReplayResult, sessions: pd.DatetimeIndex) -> ReplayResult:
    """A champion that holds only cash over the forward sessions returns 0.

    It never traded and was never marked.
    """
    cash = book.initial_cash
    zeros = {
        name: 0.0
        for name in (
            "frictionless_return",
            "realized_return",
            "slippage_leakage",
            "turnover",
            "costs",
            "reward",
            "principal_loss",
        )
    }
    nav = pd.DataFrame(
        [{"date": day, "nav": cash, "cash": cash, "market_value": 0.0, **zeros} for day in sessions]
    )
    return replace(book, nav=nav)


def mandate_of(settings: OomrlSettings, sha: str) -> Constraints:
    """The constraints of the mandate the version was repaired under (its notes), else none."""
    from oomrl.repair.versions import StrategyVersions

    mandate = StrategyVersions(settings.store.workspace_dir).metadata(sha).get("mandate") or {}
    return Constraints.model_validate(mandate.get("constraints") or {})


def evidence(
    settings: OomrlSettings,
    ledger: Ledger,
    probation: Probation,
    as_of: date,
    store: Any = None,
    rule: PromotionRule | None = None,
) -> ProbationEvidence:
    """Both books over the forward sessions (after `opened_on`, up to `as_of`), judged net of
    friction."""
    from oomrl.data.sample import ensure_sample
    from oomrl.metrics.io import returns_from_levels
    from oomrl.portfolio.rebalance import load_panels
    from oomrl.portfolio.setup import market_rules

    agent = settings.agent
    rule = rule or PromotionRule(
        test=agent.promotion_test, margin=agent.promotion_margin, z=agent.promotion_z
    )
    store = store if store is not None else ensure_sample(settings)
    days = (as_of - probation.opened_on).days + 30
    market = MarketFrames.build(
        load_panels(store, as_of, history_days=days), market_rules(settings)
    )
    benchmark = returns_from_levels(store.read_index("000300")).rename("benchmark")
    constraints = mandate_of(settings, probation.sha)
    rebalance = constraints.rebalance or "daily"
    champion = book_result(
        ledger, probation.account, "champion", probation.opened_on, as_of, market
    )
    challenger = book_result(
        ledger, probation.shadow, "challenger", probation.opened_on, as_of, market
    )
    forward = market.dates[
        (market.dates > pd.Timestamp(probation.opened_on)) & (market.dates <= pd.Timestamp(as_of))
    ]
    challenger = after_halt(challenger, forward)
    champion = after_halt(champion, forward) if len(champion.nav) else idle(champion, forward)
    # A return series needs two sessions. Before that a book has no row.
    # Only its halt can be judged.
    rows = [
        measure(result, label, sha, benchmark, rebalance, None, "probation")
        for result, label, sha in (
            (champion, "champion", ledger.active_version(probation.account) or ""),
            (challenger, "challenger", probation.sha),
        )
        if len(result.nav) >= 2
    ]
    by = {r.version: r for r in rows}
    checks = constraint_checks(by["challenger"], constraints) if "challenger" in by else []
    if "challenger" in by and "champion" in by:
        checks.append(not_worse(by["challenger"], by["champion"], rule))
    if "challenger" not in by and challenger.halted_on is not None:
        checks.append(
            Check(
                name="kill_switch",
                passed=False,
                detail=f"the challenger's shadow book halted on {challenger.halted_on}",
            )
        )
    dates = pd.to_datetime(challenger.nav["date"]) if len(challenger.nav) else pd.DatetimeIndex([])
    done = len(dates)
    first = dates.iloc[0].date() if done else None
    navs = {
        label: float(result.nav["nav"].iloc[-1])
        for label, result in (("champion", champion), ("challenger", challenger))
        if len(result.nav)
    }
    return ProbationEvidence(
        probation=probation.id,
        account=probation.account,
        version=probation.tag,
        start=first,
        end=as_of,
        sessions_done=done,
        sessions_needed=probation.sessions,
        rule=rule,
        rows=rows,
        checks=checks,
        navs=navs,
    )


# -- deciding --------------------------------------------------------------------------------------
@dataclass
class Decided:
    """A probation the chain or a person decided, with its evidence.

    A retirement also carries its autopsy.
    """

    probation: Probation
    evidence: ProbationEvidence
    autopsy: Autopsy | None = None


def decide_due(
    settings: OomrlSettings, as_of: date, store: Any = None
) -> tuple[list[Decided], list[ProbationEvidence]]:
    """Judge every open probation with enough forward sessions up to `as_of`: (decided, still
    running)."""
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.service import open_ledger

    ledger = open_ledger(settings)
    store = store if store is not None else ensure_sample(settings)  # once, not once per probation
    decided, running = [], []
    for probation in open_probations(ledger):
        found = evidence(settings, ledger, probation, as_of, store)
        if not found.ready:
            running.append(found)
            continue
        verdict: Decision = PROMOTED if found.passed else RETIRED
        why = (
            f"over {found.sessions_done} forward sessions every check passed"
            if found.passed
            else "; ".join(found.failures())
        )
        done = close(
            settings, ledger, probation, verdict, as_of, "the daily chain", why, found, store
        )
        if done is not None:
            decided.append(done)
    return decided, running


def current(
    settings: OomrlSettings, account: str, tag: str | None, store: Any = None
) -> tuple[Ledger, Probation, ProbationEvidence]:
    """The open probation of `tag` on `account`, and its evidence.

    `tag` None means the account's one. The evidence runs through the shadow's last marked session.
    """
    from oomrl.portfolio.marking import marked_through
    from oomrl.portfolio.service import open_ledger

    ledger = open_ledger(settings)
    probation = next(
        (p for p in open_probations(ledger, account) if tag is None or p.tag == tag), None
    )
    if probation is None:
        running = ", ".join(p.tag for p in open_probations(ledger, account)) or "none"
        raise ProbationError(
            f"{tag} is not on probation on account {account!r} (on probation: {running})"
        )
    day = (
        marked_through(ledger, probation.shadow)
        or marked_through(ledger, account)
        or probation.opened_on
    )
    return (
        ledger,
        probation,
        evidence(settings, ledger, probation, max(day, probation.opened_on), store),
    )


def decide_now(
    settings: OomrlSettings,
    account: str,
    tag: str,
    verdict: Decision,
    by: str,
    reason: str = "",
    store: Any = None,
) -> Decided:
    """A person promotes or retires a challenger before its probation ends.

    They decide on the evidence so far.
    """
    ledger, probation, found = current(settings, account, tag, store)
    done = close(
        settings,
        ledger,
        probation,
        verdict,
        found.end,
        by,
        reason or f"decided early by {by}",
        found,
        store,
    )
    if done is None:
        raise ProbationError(f"the probation of {tag} on {account!r} was decided meanwhile")
    return done


def close(
    settings: OomrlSettings,
    ledger: Ledger,
    probation: Probation,
    verdict: Decision,
    day: date,
    by: str,
    reason: str,
    found: ProbationEvidence,
    store: Any = None,
) -> Decided | None:
    """Record the decision (and, for a retirement, the forward autopsy as the account's alert)."""
    table = {
        "markdown": found.markdown(),
        "rows": found.table(),
        "checks": [c.model_dump() for c in found.checks],
        "sessions": found.sessions_done,
        "start": str(found.start) if found.start else None,
        "end": str(day),
    }
    # The autopsy is built first.
    # A decision is never recorded without what it tells the next repair.
    autopsy = forward_autopsy(ledger, probation, found) if verdict == RETIRED else None
    row = (
        None
        if autopsy is None
        else AlertRow(
            autopsy.alert_id, autopsy.as_of, autopsy.trigger.rule, autopsy.model_dump(mode="json")
        )
    )
    if not ledger.close_probation(probation.id, verdict, day, by, reason, table, row):
        return None
    closed = next(p for p in probations(ledger, probation.account) if p.id == probation.id)
    continue_trail(settings, closed, verdict, reason)
    return Decided(closed, found, autopsy)


def continue_trail(
    settings: OomrlSettings, probation: Probation, verdict: Decision, reason: str
) -> None:
    """The repair's trail (its run folder's trail.jsonl) takes the probation's last edge."""
    from oomrl.agent.machine import Trail
    from oomrl.repair.versions import StrategyVersions

    run_dir = StrategyVersions(settings.store.workspace_dir).metadata(probation.sha).get("run_dir")
    trail = Path(str(run_dir)) / "trail.jsonl" if run_dir else None
    if trail is not None and trail.is_file():
        Trail.resumed(trail, "probation").move(verdict, reason[:500])


def forward_autopsy(
    ledger: Ledger, probation: Probation, found: ProbationEvidence
) -> Autopsy | None:
    """What the forward market showed of a retired challenger: an autopsy of its shadow book.

    It goes to the account's alerts (rule `probation_retired`). The next repair of the account
    reads it.
    """
    from oomrl.diagnostics.critic import autopsy_for
    from oomrl.diagnostics.rules import Alert, AlertConfig, alert_id

    nav = ledger.nav_frame(probation.shadow)
    nav = nav[nav["date"] <= pd.Timestamp(found.end)]
    if len(nav) < 2 or found.start is None:
        return None
    lost = next((c for c in found.checks if c.name.startswith("net_of_friction")), None)
    by = {r.version: r for r in found.rows}
    gap = (
        (by["challenger"].net_return - by["champion"].net_return)
        if {"challenger", "champion"} <= set(by)
        else 0.0
    )
    message = (
        f"challenger {probation.tag} retired after {found.sessions_done} forward sessions "
        f"{found.start}..{found.end}: "
        + ("; ".join(found.failures()) or (lost.detail if lost else ""))
    )[:2000]
    # One retirement per version (its tag in the id).
    # Two probations opened on one date never share an alert.
    alert = Alert(
        alert_id=alert_id(
            probation.account, f"{RETIRED_RULE}:{probation.tag}", "warning", found.start
        ),
        account=probation.account,
        rule=RETIRED_RULE,
        severity="warning",
        as_of=pd.Timestamp(nav["date"].iloc[-1]).date(),
        window_start=found.start,
        value=gap,
        threshold=0.0,
        message=message,
    )
    autopsy = autopsy_for(
        alert,
        nav,
        ledger.fills_frame(probation.shadow),
        AlertConfig(),
        module=f"strategies.{probation.strategy}",
        fallback_version=probation.sha,
    )
    findings = [message[:500], *autopsy.diagnostics.findings][:50]
    return autopsy.model_copy(
        update={"diagnostics": autopsy.diagnostics.model_copy(update={"findings": findings})}
    )


# -- the shadow books in the daily chain -----------------------------------------------------------
def advance_shadows(settings: OomrlSettings, as_of: date, store: Any = None) -> dict[str, int]:
    """Trade every open shadow book on its challenger's schedule through `as_of`.

    This runs before the chain marks it. Returns shadow -> rebalances committed. A shadow the kill
    switch halted trades no more.
    """
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.marking import marked_through
    from oomrl.portfolio.rebalance import HISTORY_DAYS, advance, load_panels
    from oomrl.portfolio.service import membership, open_ledger
    from oomrl.portfolio.setup import rebalance_setup
    from oomrl.repair.trading import resolve_strategy

    ledger = open_ledger(settings)
    store = store if store is not None else ensure_sample(settings)
    done: dict[str, int] = {}
    for probation in open_probations(ledger):
        if ledger.account(probation.shadow).status is not AccountStatus.ACTIVE:
            continue
        since = marked_through(ledger, probation.shadow) or probation.opened_on
        if since >= as_of:
            continue
        resolved = resolve_strategy(settings, ledger, probation.shadow, probation.strategy)
        panels = load_panels(store, as_of, history_days=HISTORY_DAYS + (as_of - since).days)
        setup = rebalance_setup(resolved.strategy, resolved.version, settings, membership(store))
        outcomes = advance(
            ledger, probation.shadow, since + timedelta(days=1), as_of, panels, setup
        )
        done[probation.shadow] = len(outcomes)
    return done
