"""Serve the loss-alert webhook: settings, the launcher they name, the app, under uvicorn."""

from __future__ import annotations

from fastapi import FastAPI

from oomrl.settings import WebhookSettings, webhook_settings
from oomrl.webhook.app import create_app
from orchestration.launch import launcher_for


def build_app(config: WebhookSettings | None = None) -> FastAPI:
    """The webhook app with the launcher its settings choose (deployment or event mode)."""
    config = config or webhook_settings()
    launcher = launcher_for(
        config.mode, config.deployment, config.auto_approve, config.approval_timeout_s
    )
    return create_app(config, launcher)


def serve(host: str = "127.0.0.1", port: int = 8765, config: WebhookSettings | None = None) -> None:
    """Run the webhook with uvicorn until interrupted (builds the app first, so bad config fails
    fast)."""
    import uvicorn

    from oomrl import logs

    logs.configure()
    uvicorn.run(build_app(config), host=host, port=port, log_level="info")
