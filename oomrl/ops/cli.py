"""The `oomrl` command (typer): one error path for every command; each area registers its commands.

orchestration/cli.py adds the commands that drive Prefect (the stack, the webhook). It is the entry
point (`oomrl`, `python -m orchestration`).

Importing this module must stay cheap: `oomrl --help` answers in well under a second. Command
modules import pandas, Prefect, SQLAlchemy and rich inside the commands, never at module level.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from oomrl import logs
from oomrl.errors import user_message
from oomrl.ops.commands import (
    agent_cmds,
    data_cmds,
    gate_cmds,
    metrics_cmds,
    ops_cmds,
    portfolio_cmds,
    settings_cmds,
)

DEBUG_KEY = "oomrl.debug"
EXIT_FAILURE = 1


class OomrlGroup(TyperGroup):
    """The top-level group: an expected failure is one line on stderr and exit 1; --debug
    re-raises."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # typer hands its own Context
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # typer's own exits and usage errors (exit 2) already say what is wrong
        except BrokenPipeError:
            # Whoever read the output went away (`oomrl data quarantine | head`): nothing to tell
            # them.
            _silence_stdout()
            raise typer.Exit(EXIT_FAILURE) from None
        except Exception as exc:
            if ctx.meta.get(DEBUG_KEY):
                raise
            message = user_message(exc)
            if message is None:
                message = (
                    f"unexpected {type(exc).__name__}: {exc} (a defect in oomrl; run again with "
                    "--debug for the traceback)"
                )
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(EXIT_FAILURE) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so flushing it at exit does not raise BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # no real stdout (tests capture it)
        pass


app = typer.Typer(
    name="oomrl",
    cls=OomrlGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def options(
    ctx: typer.Context,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the full traceback when a command fails.")
    ] = False,
) -> None:
    """Out-of-Money RL: the market judges the strategy, a deterministic gate judges the repair.

    Settings come from OOMRL_* environment variables and OOMRL_HOME/config.toml. Every command
    fails with one `error:` line on stderr (exit 1, or 2 for a usage error).
    """
    ctx.meta[DEBUG_KEY] = debug
    # Logs go to stderr under the command's own output.
    # Warnings by default (refusals, halts), every decision with --debug.
    # The command's console output stays the report.
    logs.configure("DEBUG" if debug else "WARNING")


@app.command("version")
def version() -> None:
    """Print the oomrl version."""
    from oomrl import __version__

    typer.echo(__version__)


for module in (
    data_cmds,
    gate_cmds,
    portfolio_cmds,
    metrics_cmds,
    agent_cmds,
    ops_cmds,
    settings_cmds,
):
    module.register(app)
