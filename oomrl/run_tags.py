"""The tags a flow run carries in the Prefect UI.

They say which alert started it, and which strategy version it trades.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MAX_TAG = 100  # Prefect keeps tags short; alert ids are 24 hex digits, foreign ones are cut


def alert_tag(alert_id: object) -> str:
    """`alert:<id>`: every repair run carries the alert that started it, however it was started."""
    return f"alert:{alert_id}"[:MAX_TAG]


def strategy_tags(name: str, version_label: str) -> list[str]:
    """`strategy:<name>` and `strategy-version:<tag>` (v1, v2 …; a version no workspace tags keeps
    12 hex digits of its SHA)."""
    tag = version_label.split(" ", 1)[0]
    return [f"strategy:{name}"[:MAX_TAG], f"strategy-version:{tag}"[:MAX_TAG]]


class TradedVersion(BaseModel):
    """The strategy an account trades: name, version (git SHA), label ("v1 daily_momentum")."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    label: str
