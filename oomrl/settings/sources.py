"""A group's variables: each field's name in the environment, and the values set there."""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar, get_origin

from pydantic import BaseModel, ConfigDict

from oomrl.errors import SettingsError


class Group(BaseModel):
    """A group of settings: read only through the root, from its variables and its config table."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelt key is named

    # Variables are ENV_PREFIX + field name, unless a field names its own (`variable_of`).
    ENV_PREFIX: ClassVar[str] = "OOMRL_"


def own_variable(name: str) -> dict[str, Any]:
    """A field's `json_schema_extra` giving it a variable outside its group's prefix."""
    return {"env": name}


def variable_of(group: type[Group], field: str) -> str:
    """The environment variable of a group's field."""
    extra = group.model_fields[field].json_schema_extra
    named = extra.get("env") if isinstance(extra, dict) else None
    return str(named) if named else f"{group.ENV_PREFIX}{field}".upper()


def upper_environment() -> dict[str, str]:
    """The environment by upper-cased name: variables are matched ignoring case, as before."""
    return {name.upper(): value for name, value in os.environ.items()}


def is_set(variable: str, env: dict[str, str] | None = None) -> bool:
    """Whether the environment gives `variable`, matched as the sources read it (ignoring case).

    `env`: an `upper_environment()` already read, for a caller asking of many variables."""
    return variable.upper() in (upper_environment() if env is None else env)


def group_environment(group: type[Group], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The group's values set in the environment (`env`: an `upper_environment()` already read)."""
    env = upper_environment() if env is None else env
    found: dict[str, Any] = {}
    for field, info in group.model_fields.items():
        variable = variable_of(group, field)
        if variable not in env:
            continue
        text = env[variable]
        if get_origin(info.annotation) in (dict, list) or info.annotation in (dict, list):
            try:  # a table or list is given as JSON
                found[field] = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SettingsError(
                    f"invalid setting: {variable} is not valid JSON ({exc})"
                ) from None
        else:
            found[field] = text
    return found
