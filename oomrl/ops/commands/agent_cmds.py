"""CLI of the agent area: `oomrl repair` and `oomrl versions
list|show|activate|rollback|promote|retire|init`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from oomrl.ops.commands import (
    AccountOption,
    Lock,
    Provider,
    StrategyOption,
    account_or_default,
    finite_seconds,
    valid_account,
)

versions_app = typer.Typer(
    help="Strategy versions: commits and tags in OOMRL_HOME/workspace.", no_args_is_help=True
)

RefArgument = Annotated[
    str,
    typer.Argument(
        metavar="REF", help="A version tag (v2), a commit SHA or a unique prefix of one."
    ),
]


def _versions() -> Any:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.repair.versions import StrategyVersions
    from oomrl.settings import get_settings

    settings = get_settings()
    settings.store.ensure_dirs()
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    return _recovered(StrategyVersions(settings.store.workspace_dir, ledger)), settings


def _read_versions() -> Any:
    """The workspace and ledger for reading.

    Nothing is created: no folder, no database, no repo. A promotion whose process died is finished
    or undone first, and said so.
    """
    from oomrl.portfolio.service import existing_ledger
    from oomrl.repair.versions import StrategyVersions
    from oomrl.settings import get_settings

    settings = get_settings()
    return _recovered(
        StrategyVersions(settings.store.workspace_dir, existing_ledger(settings))
    ), settings


def _recovered(store: Any) -> Any:
    from oomrl.repair import promotion

    note = promotion.recover(store)
    if note:
        typer.echo(note, err=True)
    return store


def _review(mandate: Any) -> Any:
    """Ask the person at the terminal to approve, edit or reject the mandate."""
    from oomrl.diagnostics.mandate import Constraints
    from oomrl.repair.loop import Decision

    typer.echo(json.dumps(mandate.model_dump(exclude_none=True), indent=1))
    try:
        action = typer.prompt("approve, edit or reject?", default="approve")
    except (typer.Abort, EOFError):
        return Decision(
            action="reject",
            reason="no answer at the terminal; use --auto-approve for unattended runs",
        )
    if action == "reject":
        return Decision(
            action="reject", reason=typer.prompt("why?", default="rejected at the terminal")
        )
    if action == "edit":
        c = mandate.constraints
        edited = mandate.model_copy(
            update={
                "text": typer.prompt("mandate", default=mandate.text),
                "constraints": Constraints(
                    rebalance=typer.prompt("rebalance", default=c.rebalance or "weekly"),
                    max_adv_participation=float(
                        typer.prompt(
                            "max ADV participation", default=c.max_adv_participation or 0.05
                        )
                    ),
                    max_weekly_turnover=float(
                        typer.prompt("max weekly turnover", default=c.max_weekly_turnover or 0.3)
                    ),
                ),
                "supersedes": _superseded_answer(
                    typer.prompt(
                        "superseded old tests (node ids separated by spaces; - for none)",
                        default=" ".join(mandate.supersedes) or "-",
                    )
                ),
            }
        )
        edited = type(mandate).model_validate(edited.model_dump())  # a bad node id is refused here
        return Decision(action="edit", mandate=edited, reason="edited at the terminal")
    if action != "approve":
        return Decision(action="reject", reason=f"unknown answer {action!r} counts as a rejection")
    return Decision(action="approve", reason="approved at the terminal")


def _superseded_answer(answer: str) -> list[str]:
    """The node ids typed at the terminal; '-' alone names none."""
    return [] if answer.strip() == "-" else answer.split()


def _step_status(console: Any = None) -> Any:
    """A run_step for the repair that shows the running step with a spinner.

    The spinner shows on a terminal only.
    """
    from rich.console import Console

    console = console or Console(stderr=True)

    def run_step(step: str, function: Any, *args: Any) -> Any:
        if not console.is_terminal:
            return function(*args)
        with console.status(f"repair: {step} ..."):
            return function(*args)

    return run_step


def repair_command(
    autopsy: Annotated[
        Path,
        typer.Option(
            "--autopsy",
            metavar="FILE",
            help="Autopsy JSON, or a loss alert {alert_id, account, as_of?} completed from the "
            "ledger.",
        ),
    ],
    provider: Annotated[
        Provider | None,
        typer.Option(
            "--provider",
            help="Where the agent's answers come from (default: openai when an endpoint "
            "is configured, else offline).",
        ),
    ] = None,
    auto_approve: Annotated[
        bool, typer.Option("--auto-approve", help="Approve the mandate unattended.")
    ] = False,
    transcript: Annotated[
        Path | None,
        typer.Option(
            "--transcript",
            metavar="FILE",
            help="Recorded JSONL transcript for the replay provider.",
        ),
    ] = None,
    account: Annotated[
        str | None,
        typer.Option(
            "--account",
            metavar="NAME",
            callback=valid_account,
            help="Repair this ledger account (default: the autopsy's).",
        ),
    ] = None,
    lock: Annotated[
        Lock, typer.Option("--lock", help="RO-Lock backend of the gate.")
    ] = Lock.namespace,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            min=0,
            callback=finite_seconds,
            help="How long to wait for another repair of the account to finish "
            "(0: refuse at once).",
        ),
    ] = 900.0,
    probation: Annotated[
        int | None,
        typer.Option(
            "--probation",
            metavar="SESSIONS",
            min=0,
            help="Forward sessions the repaired version trades a shadow book before the daily "
            "chain decides "
            "(default: OOMRL_AGENT_PROBATION_SESSIONS, 20; 0: it takes the capital at once).",
        ),
    ] = None,
) -> None:
    """Repair the strategy an autopsy names.

    Mandate, tests first (source locked), patch (tests locked), cross-validation, promotion.
    One repair per account at a time, whatever started it: this command, the flow, the demo.
    """
    from oomrl.errors import OomrlError
    from oomrl.repair import loop as domain
    from oomrl.repair.inputs import check_known, check_transcript, read_autopsy_file
    from oomrl.settings import get_settings

    settings = get_settings()
    checked = read_autopsy_file(autopsy)  # everything is checked before anything is written
    check_known(checked, settings.ledger_url, settings.store.workspace_dir, account)
    if provider is Provider.replay or transcript is not None:
        if transcript is None:
            raise OomrlError("the replay provider needs a transcript (--transcript FILE)")
        check_transcript(transcript)
    ctx = domain.open_context(
        settings,
        checked,
        provider=provider and provider.value,
        account=account,
        lock=lock.value,
        replay_from=transcript,
        probation=probation,
    )
    approve = (
        (lambda m: domain.Decision(action="approve", reason="auto-approved"))
        if auto_approve
        else _review
    )
    with domain.claim_for(
        ctx, "cli", wait_s=wait, say=lambda line: typer.echo(line, err=True)
    ) as claim:
        outcome = domain.run_repair(checked, ctx, approve, run_step=_step_status(), hold=claim.hold)
    typer.echo(f"run folder: {outcome.run_dir}")
    if outcome.cross_validation is not None:
        # One line per version and window, the window named
        for row in outcome.cross_validation.rows:
            ir = "n/a" if row.information_ratio is None else f"{row.information_ratio:+.2f}"
            typer.echo(
                f"  {row.version:<9} {row.window:<5} window  turnover {row.turnover:7.3f} × NAV  "
                f"max weekly {row.max_weekly_turnover:.3f} × NAV  max ADV "
                f"{row.max_adv_participation:.2%}  "
                f"costs {row.costs_fraction:.2%}  net {row.net_return:+.2%}  IR {ir}"
            )
    # What the repair flow's run state says
    ending = domain.ending_name(outcome.status, outcome.step)
    if outcome.status == "failed":
        raise OomrlError(f"repair ended {ending} at {outcome.step}: {outcome.reason}")
    typer.echo(f"repair ended {ending}: {outcome.reason}")


@versions_app.command("check")
def check_cmd() -> None:
    """Recover an interrupted promotion; check the versions agree.

    Checks branch, tags, notes and every account's active version in the ledger. Exit 1 names what
    does not agree.
    """
    from oomrl.errors import OomrlError
    from oomrl.repair import promotion

    store, _ = _read_versions()
    if not store.initialized:
        typer.echo(f"no strategy versions yet: {store.workspace} does not exist")
        return
    found = promotion.check(store)
    if found:
        raise OomrlError(
            f"the strategy versions in {store.workspace} do not agree: " + "; ".join(found)
        )
    versions = store.list()
    actives: dict[str, str] = getattr(store.ledger, "active_versions", dict)()
    typer.echo(
        f"versions consistent: branch at {store.label(store.head())}, {len(versions)} tagged "
        f"version(s), {len(actives)} account(s) on tagged versions"
    )


@versions_app.command("init")
def init_cmd() -> None:
    """Create the strategy workspace (tag v1).

    From the bundled strategies; nothing happens when the workspace exists.
    """
    from oomrl.repair import promotion

    store, _ = _versions()
    typer.echo(promotion.open_workspace(store))


@versions_app.command("list")
def list_cmd(account: AccountOption = None) -> None:
    """List the tagged versions.

    `*` marks the account's active one. A read: it creates nothing.
    """
    store, settings = _read_versions()
    if not store.initialized:
        typer.echo(
            f"no strategy versions yet: {store.workspace} does not exist (v1 is created by "
            "`oomrl versions init`, an account's first rebalance, a repair or the demo)"
        )
        return
    name = account_or_default(account, settings)
    states = _states(store.ledger, name)
    for v in store.list(name):
        typer.echo(
            f"{'*' if v.active else ' '} {v.tag:<5} {v.sha[:12]}  {v.date}  "
            f"{states.get(v.sha, '-'):<9} "
            f"{v.strategy or '-':<18} {v.subject}"
        )


def _states(ledger: Any, account: str) -> dict[str, str]:
    """sha -> active, probation or retired for `account` (nothing without a ledger)."""
    from oomrl.repair.probation import version_states

    return version_states(ledger, account) if ledger is not None else {}


ReasonOption = Annotated[
    str, typer.Option("--reason", metavar="TEXT", help="Why, for the ledger and the trail.")
]


def _decide(ref: str, account: str | None, verdict: str, reason: str) -> None:
    from oomrl.owners import Owner
    from oomrl.repair.probation import decide_now

    store, settings = _versions()
    name = account_or_default(account, settings)
    tag = next((v.tag for v in store.list() if v.tag == ref or v.sha.startswith(ref)), ref)
    done = decide_now(
        settings,
        name,
        tag,
        verdict,  # type: ignore[arg-type]
        f"{Owner.me().describe()} (oomrl versions)",
        reason=reason,
    )
    typer.echo(done.evidence.markdown())
    typer.echo(
        f"{tag} {verdict} on {name}"
        + (f"; the forward autopsy is alert {done.autopsy.alert_id}" if done.autopsy else "")
    )


@versions_app.command("show")
def show_cmd(ref: RefArgument, account: AccountOption = None) -> None:
    """Show one version as JSON.

    Info, metadata (autopsy, diffs, verdicts, cross-validation) and the diffstat.
    """
    store, settings = _read_versions()
    typer.echo(
        json.dumps(store.show(ref, account_or_default(account, settings)), indent=1, default=str)
    )


@versions_app.command("activate")
def activate_cmd(
    ref: RefArgument, account: AccountOption = None, strategy: StrategyOption = None
) -> None:
    """Make the account trade this version.

    The ledger records the switch.
    """
    store, settings = _versions()
    name = account_or_default(account, settings)
    sha = store.activate(ref, name, strategy)
    typer.echo(f"{name} now trades {sha}")


@versions_app.command("rollback")
def rollback_cmd(account: AccountOption = None, strategy: StrategyOption = None) -> None:
    """Activate the version tagged before the active one."""
    store, settings = _versions()
    name = account_or_default(account, settings)
    sha = store.rollback(name, strategy)
    typer.echo(f"{name} rolled back to {sha}")


@versions_app.command("promote")
def promote_cmd(ref: RefArgument, account: AccountOption = None, reason: ReasonOption = "") -> None:
    """Give a challenger the capital now.

    It ends the probation on the forward evidence so far. The ledger and the repair's trail record
    who and why.
    """
    _decide(ref, account, "promoted", reason)


@versions_app.command("retire")
def retire_cmd(ref: RefArgument, account: AccountOption = None, reason: ReasonOption = "") -> None:
    """Retire a challenger now.

    Its shadow book closes and the champion keeps the capital. An autopsy of its forward sessions
    becomes the account's alert.
    """
    _decide(ref, account, "retired", reason)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("repair")(repair_command)
    app.add_typer(versions_app, name="versions")
