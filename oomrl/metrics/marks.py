"""Events drawn on the charts, with their dates.

They are loss alerts, repairs, probations (start, decision) and promotions (version switches)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel

MarkKind = Literal["alert", "repair", "probation", "decision", "promotion"]


@dataclass(frozen=True)
class Mark:
    """One event on one session: what it was and a short label (e.g. "v2 daily_momentum")."""

    date: pd.Timestamp
    kind: MarkKind
    label: str
    severity: str = ""

    def row(self) -> dict[str, str]:
        return {
            "date": self.date.date().isoformat(),
            "event": self.kind,
            "detail": f"{self.severity} {self.label}".strip(),
        }


def alert_marks(alerts: Iterable[Mapping[str, Any]]) -> list[Mark]:
    """One mark per stored alert, on its `as_of` session (ledger.alerts rows)."""
    marks = []
    for alert in alerts:
        payload = alert.get("payload") or {}
        marks.append(
            Mark(
                pd.Timestamp(alert["as_of"]),
                "alert",
                str(alert["rule"]),
                str(payload.get("severity", "")),
            )
        )
    return marks


def promotion_marks(versions: pd.Series, labels: Mapping[str, str] | None = None) -> list[Mark]:
    """A mark on the first session each newly live version traded (a promotion, or a rollback).

    `versions` is the date-indexed strategy version of each NAV row. The first version is where the
    account started, not a switch, so it has no mark.
    """
    names = labels or {}
    clean = versions.dropna().sort_index().astype(str)
    switched = clean[clean != clean.shift()].iloc[1:]
    return [
        Mark(pd.Timestamp(day), "promotion", names.get(sha, sha[:12]))
        for day, sha in switched.items()
    ]


class _RunAlert(BaseModel):
    """What a mark reads of a run folder's autopsy.json: whose alert, and its date."""

    account: str | None = None
    as_of: date


def repair_marks(runs_dir: Path, account: str) -> list[Mark]:
    """One mark per repair run of `account` (runs/repair-*/), on its autopsy's date.

    The mark carries its outcome. Unreadable or foreign run folders are skipped. A report never
    fails on another run's leftovers.
    """
    import json

    marks = []
    for folder in sorted(runs_dir.glob("repair-*")):
        try:
            alert = _RunAlert.model_validate_json((folder / "autopsy.json").read_text())
            outcome = (
                json.loads((folder / "outcome.json").read_text())
                if (folder / "outcome.json").exists()
                else {}
            )
            if alert.account not in (None, account):
                continue
            day = pd.Timestamp(alert.as_of)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        status = str(outcome.get("status", "unfinished"))
        tag = (outcome.get("version") or {}).get("tag")
        marks.append(Mark(day, "repair", f"{status}{' → ' + tag if tag else ''}"))
    return marks


def probation_marks(probations: Iterable[Mapping[str, Any]]) -> list[Mark]:
    """Two marks per probation (ledger.probations rows): its start and its decision.

    The start is on the last session the repair saw; the shadow book trades from the next. The
    decision is on the session it was decided (promoted or retired)."""
    marks = []
    for row in probations:
        marks.append(
            Mark(pd.Timestamp(row["opened_on"]), "probation", f"{row['tag']} on probation")
        )
        if row.get("decided_on") is not None and row.get("status") in ("promoted", "retired"):
            marks.append(
                Mark(pd.Timestamp(row["decided_on"]), "decision", f"{row['tag']} {row['status']}")
            )
    return marks


def within(marks: Iterable[Mark], start: pd.Timestamp, end: pd.Timestamp) -> list[Mark]:
    """The marks dated inside [start, end], in date order."""
    return sorted((m for m in marks if start <= m.date <= end), key=lambda m: (m.date, m.kind))


def marks_table(marks: Iterable[Mark]) -> pd.DataFrame:
    """The marks as a date / event / detail table."""
    return pd.DataFrame([m.row() for m in marks], columns=["date", "event", "detail"])
