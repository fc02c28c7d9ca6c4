"""CLI of the agent area: `oomrl repair` and `oomrl versions list|show|activate|rollback|init`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from oomrl.config import get_settings
from oomrl.errors import OomrlError

versions_app = typer.Typer(help="Strategy versions: commits and tags in OOMRL_HOME/workspace.",
                           no_args_is_help=True)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _versions() -> Any:
    from oomrl.portfolio.ledger import Ledger
    from oomrl.versions import StrategyVersions

    settings = get_settings()
    settings.ensure_dirs()
    ledger = Ledger(settings.ledger)
    ledger.create_schema()
    return StrategyVersions(settings.workspace_dir, ledger), settings


def _review(mandate: Any) -> Any:
    """Ask the person at the terminal to approve, edit or reject the mandate."""
    from oomrl.agent.roles import Constraints
    from oomrl.repair import Decision

    typer.echo(json.dumps(mandate.model_dump(exclude_none=True), indent=1))
    try:
        action = typer.prompt("approve, edit or reject?", default="approve")
    except (typer.Abort, EOFError):
        return Decision(action="reject", reason="no answer at the terminal; use --auto-approve "
                                                "for unattended runs")
    if action == "reject":
        return Decision(action="reject", reason=typer.prompt("why?", default="rejected at the terminal"))
    if action == "edit":
        c = mandate.constraints
        edited = mandate.model_copy(update={
            "text": typer.prompt("mandate", default=mandate.text),
            "constraints": Constraints(
                rebalance=typer.prompt("rebalance", default=c.rebalance or "weekly"),
                max_adv_participation=float(typer.prompt("max ADV participation",
                                                         default=c.max_adv_participation or 0.05)),
                max_weekly_turnover=float(typer.prompt("max weekly turnover",
                                                       default=c.max_weekly_turnover or 0.3)))})
        return Decision(action="edit", mandate=edited, reason="edited at the terminal")
    if action != "approve":
        return Decision(action="reject", reason=f"unknown answer {action!r} counts as a rejection")
    return Decision(action="approve", reason="approved at the terminal")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""

    @app.command("repair")
    def repair_cmd(
        autopsy: Annotated[Path, typer.Option("--autopsy", help="Autopsy JSON file (DESIGN §4.4).")],
        provider: Annotated[str | None, typer.Option(
            "--provider", help="offline | openai | replay (default: openai when an endpoint is "
                               "configured, else offline)")] = None,
        auto_approve: Annotated[bool, typer.Option(
            "--auto-approve", help="Approve the mandate unattended.")] = False,
        transcript: Annotated[Path | None, typer.Option(
            "--transcript", help="Recorded transcript (replay provider).")] = None,
        account: Annotated[str | None, typer.Option(
            "--account", help="Account (default: the autopsy's).")] = None,
        lock: Annotated[str, typer.Option(
            "--lock", help="Gate RO-Lock: namespace | docker | hash-only.")] = "namespace",
    ) -> None:
        """Repair the strategy an autopsy names: mandate, tests first, patch, cross-validation, promotion."""
        from oomrl import repair as domain

        try:
            data = json.loads(autopsy.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _fail(f"cannot read autopsy {autopsy}: {exc}") from exc
        try:
            checked = domain.load_autopsy(data)
            ctx = domain.open_context(get_settings(), checked, provider=provider, account=account,
                                      lock=lock, replay_from=transcript)
            approve = (lambda m: domain.Decision(action="approve", reason="auto-approved")) \
                if auto_approve else _review
            outcome = domain.run_repair(checked, ctx, approve)
        except OomrlError as exc:
            raise _fail(str(exc)) from exc
        typer.echo(f"run folder: {outcome.run_dir}")
        if outcome.cross_validation is not None:
            for row in outcome.cross_validation.rows:
                ir = "n/a" if row.information_ratio is None else f"{row.information_ratio:+.2f}"
                typer.echo(f"  {row.version:<9} turnover {row.turnover:7.3f}  max weekly "
                           f"{row.max_weekly_turnover:.3f}  max ADV {row.max_adv_participation:.4f}  "
                           f"costs {row.costs_fraction:.2%}  net {row.net_return:+.2%}  IR {ir}")
        if outcome.status == "failed":
            raise _fail(f"repair failed at {outcome.step}: {outcome.reason}")
        typer.echo(f"repair {outcome.status}: {outcome.reason}")

    @versions_app.command("init")
    def init_cmd() -> None:
        """Create the workspace from the bundled strategies (tag v1), if it does not exist."""
        store, _ = _versions()
        typer.echo(store.init())

    @versions_app.command("list")
    def list_cmd(account: str = typer.Option(None, "--account")) -> None:
        """Every tagged version; `*` marks the account's active one."""
        store, settings = _versions()
        try:
            store.init()
            rows = store.list(account or settings.account)
        except OomrlError as exc:
            raise _fail(str(exc)) from exc
        for v in rows:
            typer.echo(f"{'*' if v.active else ' '} {v.tag:<5} {v.sha[:12]}  {v.date}  "
                       f"{v.strategy or '-':<18} {v.subject}")

    @versions_app.command("show")
    def show_cmd(ref: str, account: str = typer.Option(None, "--account")) -> None:
        """One version as JSON: info, metadata (autopsy, diffs, verdicts, cross-validation), diffstat."""
        store, settings = _versions()
        try:
            typer.echo(json.dumps(store.show(ref, account or settings.account), indent=1, default=str))
        except OomrlError as exc:
            raise _fail(str(exc)) from exc

    @versions_app.command("activate")
    def activate_cmd(ref: str, account: str = typer.Option(None, "--account"),
                     strategy: str = typer.Option(None, "--strategy")) -> None:
        """Make the account trade this version (recorded in the ledger)."""
        store, settings = _versions()
        try:
            sha = store.activate(ref, account or settings.account, strategy)
        except OomrlError as exc:
            raise _fail(str(exc)) from exc
        typer.echo(f"{account or settings.account} now trades {sha}")

    @versions_app.command("rollback")
    def rollback_cmd(account: str = typer.Option(None, "--account"),
                     strategy: str = typer.Option(None, "--strategy")) -> None:
        """Activate the version tagged before the account's active one."""
        store, settings = _versions()
        try:
            sha = store.rollback(account or settings.account, strategy)
        except OomrlError as exc:
            raise _fail(str(exc)) from exc
        typer.echo(f"{account or settings.account} rolled back to {sha}")

    app.add_typer(versions_app, name="versions")
