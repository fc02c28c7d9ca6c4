"""The config file: which one (OOMRL_CONFIG, else OOMRL_HOME/config.toml), read bounded, keys
checked."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from oomrl.errors import SettingsError

MAX_CONFIG_BYTES = 1024 * 1024


def config_path() -> tuple[Path, bool]:
    """The config file to read and whether OOMRL_CONFIG named it explicitly."""
    named = os.environ.get("OOMRL_CONFIG")
    if named is not None:
        if not named.strip():
            raise SettingsError("OOMRL_CONFIG is set but empty: name a TOML file or unset it")
        return Path(named).expanduser(), True
    home = Path(os.environ.get("OOMRL_HOME") or Path.home() / ".oomrl").expanduser()
    return home / "config.toml", False


def _read_config(path: Path) -> str:
    """The file's text: a regular file of at most MAX_CONFIG_BYTES of UTF-8, else SettingsError
    naming it."""
    from oomrl.files import read_bounded

    raw = read_bounded(path, MAX_CONFIG_BYTES, f"config file {path}", SettingsError)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(
            f"config file {path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None


def config_file_values(
    known: Collection[str], tables: Collection[str], moved: Mapping[str, str]
) -> dict[str, Any]:
    """Values from the TOML file named by OOMRL_CONFIG, or OOMRL_HOME/config.toml when present.

    `known`: the top-level names; `tables`: those taking a table; `moved`: old keys' new places.
    """
    path, named = config_path()
    if not path.exists():
        if named:
            raise SettingsError(f"OOMRL_CONFIG names {path}, which does not exist")
        return {}
    try:
        data = tomllib.loads(_read_config(path))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from exc
    if "oomrl" not in data:  # the whole file is oomrl's; its tables may configure other tools
        ours = {k: v for k, v in data.items() if not isinstance(v, dict) or k in tables}
        return _known_values(path, ours, "", known, tables, moved)
    if not isinstance(data["oomrl"], dict):
        raise SettingsError(f"config file {path}: [oomrl] must be a table")
    return _known_values(path, data["oomrl"], "oomrl.", known, tables, moved)


def _known_values(
    path: Path,
    table: dict[str, Any],
    prefix: str,
    known: Collection[str],
    tables: Collection[str],
    moved: Mapping[str, str],
) -> dict[str, Any]:
    """The settings of `table`; a moved or misspelt key, or a misplaced table, is named."""
    old = sorted(k for k in table if k in moved)
    if old:
        places = "; ".join(
            f"{k} is now {moved[k].split('.')[1]} under [{prefix}{moved[k].split('.')[0]}]"
            for k in old
        )
        raise SettingsError(f"config file {path}: settings moved into groups: {places}")
    unknown = sorted(
        f"[{prefix}{k}]" if isinstance(v, dict) else k for k, v in table.items() if k not in known
    )
    if unknown:
        raise SettingsError(
            f"config file {path}: unknown setting(s) {', '.join(unknown)}; "
            f"known: {', '.join(known)}"
        )
    misplaced = sorted(k for k, v in table.items() if isinstance(v, dict) != (k in tables))
    if misplaced:
        raise SettingsError(
            f"config file {path}: {misplaced[0]} is a group of settings: write it as the "
            f"table [{prefix}{misplaced[0]}]"
        )
    return table
