"""A process that SIGKILLs itself at a named step of a promotion (`oomrl.repair.promotion.STEPS`):
the real crash the recovery tests need, at a chosen point.

    python -m tests.agent.kill_at STEP oomrl ARGS...                  # the `oomrl` command
    python -m tests.agent.kill_at STEP promote HOME CANDIDATE ACCOUNT [SESSIONS]  # one promotion of
                                                                               a prepared # clone
                                                                               (with a probation)
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from oomrl.repair import promotion


def kill_at(step: str) -> None:
    """Make this process die, as a power cut or the OOM killer would, when its promotion reaches
    `step`."""
    if step not in promotion.STEPS:
        raise SystemExit(f"unknown step {step!r}; one of {', '.join(promotion.STEPS)}")

    def reached(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    promotion.reached = reached


def promote(home: Path, candidate: Path, account: str, sessions: int = 0) -> None:
    from datetime import date

    from oomrl.portfolio.ledger import Ledger
    from oomrl.repair.versions import StrategyVersions

    versions = StrategyVersions(home / "workspace", Ledger(f"sqlite:///{home / 'ledger.db'}"))
    promotion.promote(
        versions,
        candidate,
        f"Repair of {account}",
        {"by": "kill_at"},
        account,
        "alpha",
        (date(2026, 1, 5), sessions) if sessions else None,
    )


def main(argv: list[str]) -> None:
    step, what, *rest = argv
    kill_at(step)
    if what == "oomrl":
        from oomrl.ops.cli import app

        app(rest, prog_name="oomrl")
    elif what == "promote":
        home, candidate, account, *sessions = rest
        promote(Path(home), Path(candidate), account, int(sessions[0]) if sessions else 0)
    else:
        raise SystemExit(f"unknown command {what!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
