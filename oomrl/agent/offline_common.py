"""What the offline rules share: schedules, limits, templates, line edits and unified diffs."""

from __future__ import annotations

import difflib
from string import Template

from oomrl.agent.roles import PROMPTS_DIR, Mandate

SCHEDULES: dict[str, dict[str, str]] = {
    "weekly": {
        "rebalance": "weekly",
        "period": "week",
        "first": "2024-07-01",
        "second": "2024-07-02",
        "same": '"2024-07-02", "2024-07-03", "2024-07-05"',
        "next": "2024-07-08",
        "last": "2024-07-05",
        "day_key": "iso_week(day)",
        "last_key": "iso_week(last_rebalance)",
    },
    "biweekly": {
        "rebalance": "biweekly",
        "period": "fortnight",
        "first": "2024-07-01",
        "second": "2024-07-08",
        "same": '"2024-07-02", "2024-07-08", "2024-07-12"',
        "next": "2024-07-15",
        "last": "2024-07-12",
        "day_key": "(iso_week(day)[0], (iso_week(day)[1] - 1) // 2)",
        "last_key": "(iso_week(last_rebalance)[0], (iso_week(last_rebalance)[1] - 1) // 2)",
    },
    "monthly": {
        "rebalance": "monthly",
        "period": "month",
        "first": "2024-07-01",
        "second": "2024-07-15",
        "same": '"2024-07-15", "2024-07-31"',
        "next": "2024-08-01",
        "last": "2024-07-31",
        "day_key": "(day.year, day.month)",
        "last_key": "(last_rebalance.year, last_rebalance.month)",
    },
}
# Used when a mandate leaves a limit out: wide enough never to bind.
OPEN_LIMITS = {"max_adv_participation": 1.0, "max_weekly_turnover": 2.0}


def template(name: str, **values: object) -> str:
    """One offline template from prompts/offline/, filled in."""
    text = (PROMPTS_DIR / "offline" / name).read_text(encoding="utf-8")
    return Template(text).substitute({k: str(v) for k, v in values.items()})


def unified_diff(path: str, old: str | None, new: str) -> str:
    """A git-style unified diff of one file (old None: a new file)."""
    before = old.splitlines(keepends=True) if old is not None else []
    lines = difflib.unified_diff(
        before,
        new.splitlines(keepends=True),
        fromfile=f"a/{path}" if old is not None else "/dev/null",
        tofile=f"b/{path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def limits(mandate: Mandate) -> dict[str, float]:
    """The mandate's ADV and turnover limits, open where it sets none."""
    c = mandate.constraints
    return {
        "max_adv_participation": c.max_adv_participation or OPEN_LIMITS["max_adv_participation"],
        "max_weekly_turnover": c.max_weekly_turnover or OPEN_LIMITS["max_weekly_turnover"],
    }


class LineEdits:
    """Line edits on a source text, applied bottom-up so earlier positions stay valid."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.ops: list[tuple[int, int, list[str]]] = []

    def replace(self, start: int, end: int, text: str) -> None:
        """Replace lines [start, end) (0-based) with `text`."""
        self.ops.append((start, end, text.splitlines(keepends=True)))

    def insert(self, at: int, text: str) -> None:
        self.replace(at, at, text)

    def result(self) -> str:
        lines = list(self.lines)
        for start, end, new in sorted(self.ops, key=lambda op: (op[0], op[1]), reverse=True):
            lines[start:end] = new
        return "".join(lines)
