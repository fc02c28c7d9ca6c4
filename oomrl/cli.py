"""The `oomrl` command line (typer): each area registers its commands from oomrl/commands/."""

from __future__ import annotations

import typer

from oomrl.commands import agent_cmds, data_cmds, gate_cmds, metrics_cmds, ops_cmds, portfolio_cmds

app = typer.Typer(
    name="oomrl",
    help="Out-of-Money RL: the market judges the strategy, a deterministic gate judges the repair.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

@app.command("version")
def version() -> None:
    """Print the oomrl version."""
    from oomrl import __version__

    typer.echo(__version__)


for module in (data_cmds, gate_cmds, portfolio_cmds, metrics_cmds, agent_cmds, ops_cmds):
    module.register(app)


def main() -> None:
    """Entry point for `python -m oomrl`."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
