"""Operations: the command line, its commands and the demo."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.ops.cli import OomrlGroup, app
    from oomrl.ops.demo import DEMO_ACCOUNT, DemoConfig, run_demo
    from oomrl.ops.demo_probation import ProbationSessions, probation_log

__all__ = [
    "DEMO_ACCOUNT",
    "DemoConfig",
    "OomrlGroup",
    "ProbationSessions",
    "app",
    "probation_log",
    "run_demo",
]
if not TYPE_CHECKING:  # a name loads its module on first use: the command line stays light
    __getattr__ = front_door(__name__, __file__)
