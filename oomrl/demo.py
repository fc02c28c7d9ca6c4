"""`oomrl demo`: the whole OOM-RL loop offline on the bundled real sample, with visible progress."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from oomrl.config import Settings, get_settings


def _settings_for(home: Path | None) -> Settings:
    """The demo's settings; `--home` replaces OOMRL_HOME for this process and its children."""
    if home is not None:
        os.environ["OOMRL_HOME"] = str(Path(home).expanduser().resolve())
    settings = get_settings()
    settings.ensure_dirs()
    return settings


def stage_market_data(settings: Settings, console: Console) -> Any:
    """Ingest the bundled sample into OOMRL_HOME/data (once) and show what is stored."""
    from oomrl.data.sample import ensure_sample

    with console.status("ingesting the bundled real sample (data/sample) ..."):
        store = ensure_sample(settings)
    summary = store.bar_summary()
    index = store.read_index()
    members = store.read_membership()
    table = Table(title=f"Market data in {settings.data_dir}", show_header=True)
    table.add_column("dataset")
    table.add_column("rows", justify="right")
    table.add_column("coverage")
    table.add_row("daily bars", f"{summary['rows']:,}",
                  f"{summary['symbols']} symbols, {_day(summary['first_date'])} → {_day(summary['last_date'])}")
    table.add_row("CSI 300 (000300)", f"{len(index):,}",
                  f"{_day(index.index.min())} → {_day(index.index.max())}" if len(index) else "—")
    table.add_row("membership", f"{len(members):,}",
                  f"{members['effective_date'].nunique()} snapshots" if len(members) else "—")
    console.print(table)
    return store


def _day(value: Any) -> str:
    return "—" if value is None else str(value)[:10]


def run_demo(home: Path | None = None, start: str = "2024-07-01", end: str = "2026-02-27",
             strategy: str = "daily_momentum", console: Console | None = None) -> dict[str, Any]:
    """Run the demo; returns what it produced (paths, per-version metrics)."""
    console = console or Console()
    settings = _settings_for(home)
    console.rule(f"oomrl demo — {strategy} from {start} to {end}, offline")
    store = stage_market_data(settings, console)
    return {"home": str(settings.home), "data_dir": str(settings.data_dir),
            "bars": store.bar_summary()["rows"]}
