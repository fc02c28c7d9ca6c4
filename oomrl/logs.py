"""One logging configuration for the CLI, the webhook server and the flows.

Every module logs to `logging.getLogger(__name__)`. So its records are named after it
(`oomrl.data.ingest`, `guardrails.gate`, ...). They land under the `oomrl` and `guardrails` loggers
configured here. The level comes from the caller, which may read it from settings. This module
reads no environment.

- CLI and webhook: `configure(level)` puts one stderr handler on each logger
  (`time LEVEL name: message`).
- Flows: Prefect owns the handlers. `PREFECT_LOGGING_EXTRA_LOGGERS=oomrl,guardrails` (prefect.yaml)
  has it attach its API (run-log) handler to these loggers. So their records are in the flow run's
  logs (and, propagated, on the root's console). `configure(level, handler=False)` then only sets
  the level. Prefect leaves it at the root's WARNING.

Records still propagate to the root logger; pytest's caplog reads them there. The root has no
handler in the CLI or the server, so nothing is printed twice.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LOGGERS = ("oomrl", "guardrails")
"""The loggers configured: every module of the two packages logs under one of them."""
DEFAULT_LEVEL = "INFO"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record is emitted.

    A test runner may swap it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.set_name("oomrl")

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # StreamHandler.__init__ assigns the stream it was given: always sys.stderr instead


def configure(level: str | None = None, *, handler: bool = True) -> None:
    """Set the `oomrl` and `guardrails` loggers to `level` (default INFO).

    With `handler`, give each one stderr handler. Idempotent: a second call changes the level, never
    adds a handler.
    """
    resolved = logging.getLevelName((level or DEFAULT_LEVEL).upper())
    if not isinstance(resolved, int):
        raise ValueError(f"unknown log level {level!r}")
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(resolved)
        if handler and not any(isinstance(h, StderrHandler) for h in logger.handlers):
            stderr = StderrHandler()
            stderr.setFormatter(logging.Formatter(FORMAT))
            logger.addHandler(stderr)
