"""The `oomrl` commands that drive Prefect: `oomrl server up|down|status`, `oomrl webhook serve`.

Prefect, uvicorn and the stack are imported inside the commands, so `oomrl --help` stays cheap.
"""

from __future__ import annotations

import json

import typer

server_app = typer.Typer(
    help="Start, stop or inspect a local stack.\n\nPrefect server, the oomrl-local pool and "
    "worker, the deployments and the webhook.",
    no_args_is_help=True,
)
webhook_app = typer.Typer(help="The signed loss-alert webhook.", no_args_is_help=True)


@server_app.command("up")
def server_up(
    host: str = typer.Option(
        "127.0.0.1", metavar="ADDRESS", help="Interface the server and webhook listen on."
    ),
    port: int = typer.Option(
        4200, min=1, max=65535, metavar="PORT", help="Prefect server (API and UI) port."
    ),
    webhook_port: int = typer.Option(
        8765, "--webhook-port", min=1, max=65535, metavar="PORT", help="Webhook port."
    ),
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        metavar="URL",
        envvar="PREFECT_API_DATABASE_CONNECTION_URL",
        help="Prefect database, e.g. postgresql+asyncpg://... (default: SQLite under OOMRL_HOME).",
    ),
    no_deploy: bool = typer.Option(False, "--no-deploy", help="Skip `prefect deploy --all`."),
    no_webhook: bool = typer.Option(False, "--no-webhook", help="Do not start the webhook."),
) -> None:
    """Start the stack and print where it is.

    `oomrl server down` stops it.
    """
    from oomrl.settings import get_settings
    from orchestration.stack import StackConfig, up

    config = StackConfig(
        home=get_settings().store.home,
        host=host,
        port=port,
        webhook_port=webhook_port,
        database_url=database_url,
        deploy=not no_deploy,
        webhook=not no_webhook,
    )
    state = up(config, say=typer.echo)
    typer.echo(f"Prefect UI:  {state['ui_url']}")
    typer.echo(f"API:         {state['api_url']}   (export PREFECT_API_URL={state['api_url']})")
    if state["webhook_url"]:
        typer.echo(f"Webhook:     {state['webhook_url']}/hooks/loss-alert")
    typer.echo(f"Logs:        {config.log_dir}   state: {config.state_file}")


@server_app.command("down")
def server_down() -> None:
    """Stop what `oomrl server up` started."""
    from oomrl.settings import get_settings
    from orchestration.stack import down

    stopped = down(get_settings().store.home, say=typer.echo)
    typer.echo("stopped: " + ", ".join(stopped) if stopped else "nothing was running")


@server_app.command("status")
def server_status() -> None:
    """Show what `oomrl server up` started.

    And whether each process still runs.
    """
    from oomrl.settings import get_settings
    from orchestration.stack import read_state, running

    state = read_state(get_settings().store.home)
    if state is None:
        typer.echo("nothing was started (no server.json)")
        raise typer.Exit(1)
    ours = running(state)  # alive and still the process `up` started (not a reused pid)
    pids = {name: {"pid": pid, "alive": ours[name]} for name, pid in dict(state["pids"]).items()}  # type: ignore[call-overload]
    state.pop("processes", None)
    typer.echo(json.dumps({**state, "pids": pids}, indent=2))


@webhook_app.command("serve")
def webhook_serve(
    host: str = typer.Option("127.0.0.1", metavar="ADDRESS", help="Interface to listen on."),
    port: int = typer.Option(8765, min=1, max=65535, metavar="PORT", help="Port to listen on."),
) -> None:
    """Serve the loss-alert webhook.

    POST /hooks/loss-alert and /hooks/alertmanager; needs OOMRL_WEBHOOK_SECRET.
    """
    from orchestration.webhook import serve

    serve(host=host, port=port)


def register(app: typer.Typer) -> None:
    """Add these commands to the `oomrl` app."""
    app.add_typer(server_app, name="server")
    app.add_typer(webhook_app, name="webhook")
