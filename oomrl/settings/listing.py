"""Every setting as a row: dotted name, variable, description, current value (secrets masked),
source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from oomrl.settings.root import GROUPS, OomrlSettings, env_name, file_values, given_by
from oomrl.settings.sources import upper_environment

SECRET_UNIT = "(secret)"  # the unit a description gives a value never shown
MASK = "********"


@dataclass(frozen=True)
class SettingRow:
    """One setting as `oomrl settings` shows it."""

    name: str
    env: str
    description: str
    value: str
    source: str  # default, config.toml or env


def _shown(value: Any, secret: bool) -> str:
    if value is None:
        return "unset"
    return MASK if secret else str(value)


def _rows_of(
    model: BaseModel, path: tuple[str, ...], from_file: dict[str, Any], env: dict[str, str]
) -> list[SettingRow]:
    """The rows of one group; `from_file`, `env`: the config file's tables, the environment."""
    rows = []
    for field, info in type(model).model_fields.items():
        loc = (*path, field)
        description = info.description or ""
        variable = env_name(loc)
        source = given_by(loc, from_file, env)
        rows.append(
            SettingRow(
                ".".join(loc),
                variable,
                description,
                _shown(getattr(model, field), SECRET_UNIT in description),
                source,
            )
        )
    return rows


def setting_rows(settings: OomrlSettings) -> list[SettingRow]:
    """The rows of every setting, group by group."""
    from_file, env = file_values(), upper_environment()
    rows: list[SettingRow] = []
    for group in GROUPS:
        rows += _rows_of(getattr(settings, group), (group,), from_file, env)
    return rows
