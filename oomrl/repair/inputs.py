"""The one door for repair inputs (CLI, flow, webhook), and loss alerts completed into autopsies.

An input is bounded JSON: a full autopsy or a loss alert. Its account and strategy must be known.
A loss alert is completed into an autopsy from the ledger.

Everything here runs before anything is written. A refused input leaves no run folder, no ledger
row and no workspace behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomrl.errors import (
    AccountOnProbationError,
    InvalidAutopsyError,
    InvalidInputError,
    OomrlError,
    UnknownAccountError,
    UnknownStrategyError,
)

if TYPE_CHECKING:
    from oomrl.diagnostics.autopsy import Completed, RepairInput

MAX_AUTOPSY_BYTES = 256 * 1024
FIRST_SESSION = date(1990, 12, 19)  # the Shanghai exchange's first session
SHANGHAI = "Asia/Shanghai"
# Files of the strategies package that are not strategies.
_NOT_STRATEGIES = frozenset({"__init__", "base", "registry"})


def parse_json(raw: bytes, what: str = "autopsy", limit: int = MAX_AUTOPSY_BYTES) -> Any:
    """JSON from bytes, refusing what would hurt downstream (pydantic-core's parser).

    Refused: over `limit` bytes, NaN/Infinity, integers beyond 4300 digits, nesting deeper than 200,
    invalid UTF-8.
    """
    from pydantic_core import from_json

    if len(raw) > limit:
        raise InvalidAutopsyError(f"{what} is {len(raw)} bytes; at most {limit} are accepted")
    try:
        return from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise InvalidAutopsyError(f"{what} is not valid JSON: {exc}") from None


def read_autopsy_file(path: Path) -> RepairInput:
    """A validated repair input from a file; the size is checked before the file is read."""
    from oomrl.files import read_bounded

    raw = read_bounded(
        path, MAX_AUTOPSY_BYTES, f"autopsy {path}", InvalidAutopsyError, regular=False
    )
    return load_autopsy(parse_json(raw, f"autopsy {path}"))


def _problems(exc: Any) -> str:
    """Pydantic errors as `field: message`, inputs not echoed (they may be megabytes)."""
    shown = [
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
    ]
    more = exc.error_count() - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def load_autopsy(data: Any) -> RepairInput:
    """The repair input from JSON data.

    It is a full Autopsy (it has `event`) or a LossAlert (`alert_id`, `account`, optional `as_of`).
    Anything else is InvalidAutopsyError naming why.
    """
    from pydantic import ValidationError

    from oomrl.diagnostics.autopsy import Autopsy, LossAlert

    if not isinstance(data, dict):
        raise InvalidAutopsyError(f"an autopsy must be a JSON object, got {type(data).__name__}")
    model: type[Autopsy | LossAlert] = Autopsy if "event" in data else LossAlert
    kind = "autopsy" if model is Autopsy else "loss alert (alert_id, account, optional as_of)"
    try:
        checked = model.model_validate(data)
    except ValidationError as exc:
        raise InvalidAutopsyError(f"invalid {kind}: {_problems(exc)}") from None
    if checked.as_of is not None:
        check_as_of(checked.as_of, kind)
    return checked


def check_as_of(as_of: date, kind: str) -> None:
    """An alert is about a session that has happened.

    That is from the first XSHG session to today in Shanghai. The market store could hold such a
    date. The critic has nothing to read about any other.
    """
    from zoneinfo import ZoneInfo

    today = datetime.now(ZoneInfo(SHANGHAI)).date()
    if as_of < FIRST_SESSION:
        raise InvalidAutopsyError(
            f"invalid {kind}: as_of {as_of} is before the first XSHG session ({FIRST_SESSION})"
        )
    if as_of > today:
        raise InvalidAutopsyError(
            f"invalid {kind}: as_of {as_of} is after today ({today}, {SHANGHAI}): "
            "an alert is about a session that has happened"
        )


@dataclass(frozen=True)
class MarkedSessions:
    """An account's first and last marked session in the ledger (None, None before its first)."""

    first: date | None
    last: date | None
    on_probation: str | None = None  # the account's challenger on probation, said for a refusal


def marked_sessions(ledger_url: str, account: str) -> MarkedSessions | None:
    """The account's marked sessions, None when the ledger does not hold it.

    They are read without creating the database or its tables.
    """
    import sqlalchemy as sa

    from oomrl.portfolio.ledger import Ledger

    url = sa.engine.make_url(ledger_url)
    if (
        url.get_backend_name() == "sqlite"
        and url.database not in (None, "", ":memory:")
        and not Path(url.database).is_file()
    ):
        return None
    ledger = Ledger(ledger_url)
    try:
        accounts, nav = ledger.t["accounts"], ledger.t["nav"]
        inspector = sa.inspect(ledger.engine)
        if not inspector.has_table(accounts.name, schema=accounts.schema):
            return None
        with ledger.engine.connect() as conn:
            if (
                conn.execute(
                    sa.select(accounts.c.account).where(accounts.c.account == account)
                ).first()
                is None
            ):
                return None
            if not inspector.has_table(nav.name, schema=nav.schema):
                return MarkedSessions(None, None)
            first, last = conn.execute(
                sa.select(sa.func.min(nav.c.date), sa.func.max(nav.c.date)).where(
                    nav.c.account == account
                )
            ).one()
            probation = ledger.t["probations"]
            running = (
                conn.execute(
                    sa.select(probation.c.tag, probation.c.opened_on, probation.c.sessions).where(
                        probation.c.account == account, probation.c.status == "open"
                    )
                ).first()
                if inspector.has_table(probation.name, schema=probation.schema)
                else None
            )
            on = (
                f"{running[0]} (since {_day(running[1])}, {running[2]} forward sessions)"
                if running
                else None
            )
            return MarkedSessions(_day(first), _day(last), on)
    finally:
        ledger.engine.dispose()


def _day(value: Any) -> date | None:
    return None if value is None else date.fromisoformat(str(value)[:10])


def account_exists(ledger_url: str, account: str) -> bool:
    """Whether the ledger holds `account`, read without creating the database or its tables."""
    return marked_sessions(ledger_url, account) is not None


def check_dates(autopsy: RepairInput, account: str, sessions: MarkedSessions) -> None:
    """An input dated inside its account's marked sessions; an undated one takes the last.

    So the critic reads the sessions the alert is about. An account with no marked session yet has
    nothing to bound by. A full autopsy carries its own metrics, so it goes on as it is.
    """
    as_of = autopsy.as_of
    if sessions.first is None or sessions.last is None:
        return
    span = f"marked {sessions.first}..{sessions.last}"
    if as_of is not None and as_of < sessions.first:
        raise InvalidAutopsyError(
            f"alert dated {as_of} is before account {account!r}'s first session "
            f"({sessions.first}; {span})"
        )
    if as_of is not None and as_of > sessions.last:
        raise InvalidAutopsyError(
            f"alert dated {as_of} is after account {account!r}'s last marked session "
            f"({sessions.last}; {span}): mark the account through the alert date first"
        )


# The metric each rule of oomrl.diagnostics.rules fires on, which the critic reads to diagnose it.
RULE_METRICS = {
    "daily_loss": "daily_pnl",
    "drawdown": "drawdown",
    "principal_loss_approaching": "cumulative_principal_loss",
    "principal_loss_reached": "cumulative_principal_loss",
    "ir_decay": "rolling_ir_60d",
    "execution_decay": "slippage_leakage",
    "turnover_spike": "turnover_annualized",
}


def check_metrics(autopsy: RepairInput, account: str, sessions: MarkedSessions) -> None:
    """Refuse an input without the metrics its rule reads.

    One case is a full autopsy whose rule's metric is null. An example is rolling_ir_60d with fewer
    than 60 sessions or no benchmark. The other is a loss alert for an account with no marked
    session. A loss alert has no metrics; the critic's rule computes them from the account's marks.
    """
    from oomrl.diagnostics.autopsy import Autopsy

    as_of = autopsy.as_of
    dated = f"alert dated {as_of}" if as_of else "undated alert"
    if not isinstance(autopsy, Autopsy):
        if sessions.first is None:
            raise InvalidAutopsyError(
                f"{dated} carries no metrics and account {account!r} has no marked "
                "session to compute them from (marked: none): send a full autopsy "
                "with metrics, or alert after the account's first marked session"
            )
        return
    rule = autopsy.trigger.rule
    metric = RULE_METRICS.get(rule)
    if metric and getattr(autopsy.metrics, metric) is None:
        window = autopsy.trigger.window_start
        marked = f"{sessions.first}..{sessions.last}" if sessions.first else "none"
        raise InvalidAutopsyError(
            f"{dated} (window from {window}) has no metrics.{metric}, which rule "
            f"{rule!r} reads (account {account!r} marked: {marked})"
        )


def strategy_exists(workspace_dir: Path, module: str) -> bool:
    """Whether `strategies.<name>` is a strategy of the workspace (the bundled ones before its first
    use)."""
    from oomrl.checkout import repo_root

    name = module.removeprefix("strategies.")
    root = workspace_dir if (workspace_dir / ".git").is_dir() else repo_root()
    return name not in _NOT_STRATEGIES and (root / "strategies" / f"{name}.py").is_file()


def check_known(
    autopsy: RepairInput, ledger_url: str, workspace_dir: Path, account: str | None = None
) -> None:
    """Refuse an input its account, dates or metrics cannot support.

    Refused: an unknown account (or `account` override) or strategy module. Refused: a date its
    account's marked sessions cannot explain (`check_dates`). Refused: an input that lacks the
    metrics its rule reads (`check_metrics`).
    """
    from oomrl.diagnostics.autopsy import Autopsy

    name = account or autopsy.account
    sessions = marked_sessions(ledger_url, name)
    if sessions is None:
        raise UnknownAccountError(
            f"unknown account {name!r}: the ledger holds no such account "
            "(accounts are opened by their first rebalance)"
        )
    module = autopsy.diagnostics.module if isinstance(autopsy, Autopsy) else None
    if module and not strategy_exists(workspace_dir, str(module)):
        raise UnknownStrategyError(
            f"unknown strategy {module!r}: the strategy workspace has no "
            f"{str(module).replace('.', '/')}.py"
        )
    if sessions.on_probation:  # its promotion would be refused after the whole repair: say it now
        tag = sessions.on_probation.split()[0]
        raise AccountOnProbationError(
            f"account {name!r} has {sessions.on_probation} on probation: the forward "
            "market judges it first; "
            f"decide it now with `oomrl versions promote|retire {tag} --account {name}` or the "
            "probation-review deployment, then repair"
        )
    check_dates(autopsy, name, sessions)
    check_metrics(autopsy, name, sessions)


def require_admitted(autopsy: object) -> None:
    """Refuse what did not come through a door.

    The repair takes an Autopsy or a LossAlert, never JSON.
    """
    from oomrl.diagnostics.autopsy import Autopsy, LossAlert

    if not isinstance(autopsy, Autopsy | LossAlert):
        raise InvalidAutopsyError(
            f"the repair takes an admitted Autopsy or LossAlert, got {type(autopsy).__name__}: "
            "admit JSON first (admit(data, settings))"
        )


def admit(data: Any, settings: Any, account: str | None = None) -> RepairInput:
    """The door every entry point uses: a validated input whose account and strategy exist."""
    checked = load_autopsy(data)
    check_known(checked, settings.ledger_url, settings.store.workspace_dir, account)
    return checked


def complete_autopsy(autopsy: RepairInput, ledger: Any) -> Completed:
    """A loss alert completed into an autopsy by the diagnostics critic from the ledger.

    The strategy is the one the account trades: its active version, else the bundled default. Or it
    is the one a pending alert names. The date is the alert's, else the account's last NAV date.
    Full autopsies are returned as they are. Without NAV history the alert stays pending, with its
    module.
    """
    from oomrl.diagnostics.autopsy import AlertModule, Autopsy, PendingAlert
    from oomrl.diagnostics.critic import autopsy_for
    from oomrl.diagnostics.rules import Alert, AlertConfig

    if isinstance(autopsy, Autopsy):
        return autopsy
    account = autopsy.account
    module = (
        autopsy.diagnostics.module
        if isinstance(autopsy, PendingAlert)
        else f"strategies.{_traded_strategy(ledger, account)}"
    )
    pending = PendingAlert(
        alert_id=autopsy.alert_id,
        account=account,
        as_of=autopsy.as_of,
        diagnostics=AlertModule(module=module),
    )
    nav = ledger.nav_frame(account)
    last = nav["date"].max() if len(nav) and "date" in nav else None
    as_of = autopsy.as_of or (None if last is None else date.fromisoformat(str(last)[:10]))
    if as_of is None:
        return pending
    alert = Alert(
        alert_id=autopsy.alert_id,
        account=account,
        rule="external",
        severity="warning",
        as_of=as_of,
        window_start=as_of,
        value=0.0,
        threshold=0.0,
        message="external loss alert",
    )
    try:
        return autopsy_for(
            alert,
            nav,
            ledger.fills_frame(account),
            AlertConfig(),
            module=module,
            fallback_version=ledger.active_version(account),
        )
    except OomrlError:
        return pending


def _traded_strategy(ledger: Any, account: str) -> str:
    from oomrl.portfolio.service import DEFAULT_STRATEGY

    active = ledger.active_strategy(account)
    return active[1] if active else DEFAULT_STRATEGY


def as_of_of(autopsy: RepairInput) -> date | None:
    """The autopsy's as-of date, when it has one."""
    return autopsy.as_of


def check_transcript(path: Path) -> None:
    """Refuse a replay transcript that is missing or not JSONL (one JSON object per line)."""
    import json

    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise InvalidInputError(
                        f"transcript {path} is not JSONL: line {number}: {exc}"
                    ) from None
                if not isinstance(record, dict):
                    raise InvalidInputError(
                        f"transcript {path} is not JSONL: line {number} is not a JSON object"
                    )
    except OSError as exc:
        raise InvalidInputError(f"cannot read transcript {path}: {exc.strerror or exc}") from None
