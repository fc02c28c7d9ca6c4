"""The `oomrl settings` command: every setting with its variable, value, source and description."""

from __future__ import annotations

import typer


def settings_command() -> None:
    """List every setting with its value, source and variable.

    One line each: dotted name, value (secrets masked), source and variable, then what it means.
    Sources: `env` (the variable), `config.toml` (OOMRL_CONFIG, else OOMRL_HOME/config.toml),
    `default`.
    """
    from oomrl.settings import get_settings
    from oomrl.settings.listing import setting_rows
    from oomrl.settings.toml import config_path

    path, _ = config_path()
    typer.echo(f"# config file: {path}{'' if path.exists() else ' (absent)'}")
    for row in setting_rows(get_settings()):
        typer.echo(f"{row.name} = {row.value}  [{row.source}; {row.env}]")
        typer.echo(f"    {row.description}")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the `oomrl` app."""
    app.command("settings")(settings_command)
