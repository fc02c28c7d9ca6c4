"""CLI command of the ops area: `oomrl demo` (the stack and the webhook are orchestration/'s)."""

from __future__ import annotations

from pathlib import Path

import typer

from oomrl.ops.commands import Lock, RepairOn, valid_strategy


def demo_command(
    home: Path | None = typer.Option(
        None,
        "--home",
        metavar="DIR",
        help="Where the demo keeps its state "
        "(default: OOMRL_HOME/demo; its ledger and workspace start fresh).",
    ),
    start: str = typer.Option("2024-07-01", metavar="DATE", help="First session of the replay."),
    end: str = typer.Option("2026-02-27", metavar="DATE", help="Last session of the replay."),
    strategy: str = typer.Option(
        "daily_momentum",
        metavar="NAME",
        callback=valid_strategy,
        help="The strategy the agent starts with.",
    ),
    repair_on: RepairOn = typer.Option(
        RepairOn.friction,
        "--repair-on",
        help="Which new alert starts a "
        "repair: friction (slippage leakage, or anything critical), "
        "critical or warning.",
    ),
    max_repairs: int = typer.Option(
        2, "--max-repairs", min=0, metavar="N", help="Repairs at most (0: never repair)."
    ),
    lock: Lock = typer.Option(Lock.namespace, help="RO-Lock backend of the gate."),
    probation: int = typer.Option(
        20,
        "--probation",
        min=0,
        metavar="N",
        help="Forward sessions a repaired "
        "version trades a shadow book before the chain promotes or retires it "
        "(0: it takes the capital at once).",
    ),
) -> None:
    """Run the whole loop offline on the bundled sample.

    Replay, alert, repair, probation, promote, Table 1 and the tearsheet.
    """
    from oomrl.ops.demo import run_demo

    run_demo(
        home=home,
        start=start,
        end=end,
        strategy=strategy,
        repair_on=repair_on.value,
        max_repairs=max_repairs,
        lock=lock.value,
        probation=probation,
    )


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("demo")(demo_command)
