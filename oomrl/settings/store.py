"""The store group: the home folder and what lives in it."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from oomrl.settings.sources import Group


class StoreSettings(Group):
    """Where oomrl keeps its files (OOMRL_HOME, [oomrl.store]); the folders derive from it."""

    home: Path = Field(
        default_factory=lambda: Path.home() / ".oomrl",
        description="Where oomrl keeps its data, ledger, runs and workspace (folder).",
    )
    sample_clock: date | None = Field(
        None, description="Session the bundled sample is played up to; `off`: all at once (date)."
    )

    @field_validator("home", mode="before")
    @classmethod
    def _expand_home(cls, value: Any) -> Path:
        if not str(value).strip():
            raise ValueError("must name a folder, not be empty")
        home = Path(value).expanduser()
        if home.exists() and not home.is_dir():
            raise ValueError("is a file, not a folder")
        return home

    @field_validator("sample_clock", mode="before")
    @classmethod
    def _clock_off(cls, value: Any) -> Any:
        """`off` (or empty) turns the sample clock off; anything else must be a date."""
        return None if isinstance(value, str) and value.strip().lower() in ("", "off") else value

    # Folders derived from the home, one property each.
    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def workspace_dir(self) -> Path:
        return self.home / "workspace"

    @property
    def runs_dir(self) -> Path:
        return self.home / "runs"

    def ensure_dirs(self) -> None:
        """Create the home folders, private to the user (0700)."""
        from oomrl.files import private_dir

        private_dir(self.home)
        for path in (self.data_dir, self.runs_dir):
            private_dir(path, tighten=True)
