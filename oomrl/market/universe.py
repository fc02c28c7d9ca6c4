"""The CSI 300 universe point in time.

Members on a date are the snapshot with the latest effective date <= that date."""

from __future__ import annotations

from typing import Any

import pandas as pd

from oomrl.market.boards import to_symbol


def members_on(membership: pd.DataFrame, date: Any) -> list[str]:
    """Sorted member symbols on `date`; empty when `date` precedes every snapshot (membership
    unknown)."""
    if membership.empty:
        return []
    day = pd.Timestamp(date).normalize()
    effective = membership["effective_date"]
    known = effective[effective <= day]
    if known.empty:
        return []
    latest = known.max()
    return sorted(membership.loc[effective == latest, "symbol"].astype(str))


def members_between(membership: pd.DataFrame, start: Any, end: Any) -> list[str]:
    """Every symbol that was a member on some day of [start, end].

    That is the ingest universe, with no survivorship."""
    if membership.empty:
        return []
    lo, hi = pd.Timestamp(start).normalize(), pd.Timestamp(end).normalize()
    effective = membership["effective_date"]
    dates = sorted(effective[(effective > lo) & (effective <= hi)].unique())
    snapshots = [lo, *dates]
    found: set[str] = set()
    for day in snapshots:
        found.update(members_on(membership, day))
    return sorted(found)


def membership_from_changes(base: list[str], base_date: Any, changes: pd.DataFrame) -> pd.DataFrame:
    """Snapshots (effective_date, symbol) from a base list and change intervals.

    A change interval is (code, start_date, end_date). start_date is the first day in the index,
    end_date the first day out (empty: still in). One snapshot is produced at base_date and one per
    distinct change date after it.
    """
    start = pd.Timestamp(base_date)
    table = changes.assign(
        symbol=changes["code"].map(to_symbol),
        start_date=pd.to_datetime(changes["start_date"]),
        end_date=pd.to_datetime(changes["end_date"]),
    )
    days = sorted({d for d in [*table["start_date"], *table["end_date"].dropna()] if d > start})
    current = {to_symbol(code) for code in base}
    rows: list[dict[str, Any]] = [{"effective_date": start, "symbol": s} for s in sorted(current)]
    for day in days:
        current -= set(table.loc[table["end_date"] == day, "symbol"])
        current |= set(table.loc[table["start_date"] == day, "symbol"])
        rows.extend({"effective_date": day, "symbol": s} for s in sorted(current))
    return pd.DataFrame(rows, columns=["effective_date", "symbol"])
