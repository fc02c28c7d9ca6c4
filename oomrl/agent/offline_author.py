"""The offline Test Author's rules: tests from a mandate's constraints, written from S and T alone.

It never sees the Coder's work. It gives new bodies to exactly the old tests the approved mandate
supersedes. The offline Critic found those by running them against the unchanged source under a
probe (`mandate_probe`: `pinned_tests`). Tests for what cross-validation found missing come from
the failed checks' names. This module imports nothing of the offline Coder.
"""

from __future__ import annotations

import ast
from pathlib import Path

from oomrl.agent.offline_common import SCHEDULES, LineEdits, limits, template
from oomrl.agent.roles import Mandate, MissedCheck
from oomrl.errors import OomrlError

PROBE_PLUGIN = "oomrl_mandate_probe"
PROBE_FILE = Path(__file__).resolve().parent / "mandate_probe.py"
# Checks that tests written from their names can catch. The others (IR, drawdown) need a replay.
MISSED_TEMPLATES = {
    "rebalance": "weeks",
    "max_weekly_turnover": "weeks",
    "max_adv_participation": "adv",
}
PERIOD_KEYS = {
    "weekly": "tuple(day.isocalendar()[:2])",
    "biweekly": "(day.isocalendar()[0], (day.isocalendar()[1] - 1) // 2)",
    "monthly": "(day.year, day.month)",
}


def _imports(mandate: Mandate, market: bool, schedule: bool) -> str:
    lines = (
        ["from strategy_host import open_strategy"]
        if not market
        else [
            "import numpy as np",
            "import pandas as pd",
            "",
            "from strategy_host import open_strategy",
        ]
    )
    return "\n".join((["from datetime import date", ""] if schedule else []) + lines)


def mandate_tests(mandate: Mandate) -> str:
    """A new test module encoding every constraint of the mandate (red on the old code)."""
    c = mandate.constraints
    schedule = SCHEDULES.get(c.rebalance or "")
    market = c.max_adv_participation is not None or c.max_weekly_turnover is not None
    parts = [
        template(
            "tests_header.py.txt",
            mandate_id=mandate.alert_id or "manual",
            module=mandate.module,
            text=mandate.text,
            strategy=mandate.strategy,
            imports=_imports(mandate, market, bool(schedule)),
        )
    ]
    if schedule:
        parts.append(template("tests_schedule.py.txt", **schedule))
    if market:
        parts.append(template("tests_market.py.txt"))
    if c.max_adv_participation is not None:
        parts.append(template("tests_adv.py.txt", max_adv_participation=c.max_adv_participation))
    if c.max_weekly_turnover is not None:
        parts.append(template("tests_turnover.py.txt", max_weekly_turnover=c.max_weekly_turnover))
    return "".join(parts)


def missed_tests(mandate: Mandate, missed: list[MissedCheck]) -> str | None:
    """A test module for the failed cross-validation checks the rules can encode, or None."""
    c = mandate.constraints
    kinds = {MISSED_TEMPLATES[m.check] for m in missed if m.check in MISSED_TEMPLATES}
    if "adv" in kinds and c.max_adv_participation is None:
        kinds.discard("adv")
    if "weeks" in kinds and c.rebalance in (None, "daily") and c.max_weekly_turnover is None:
        kinds.discard("weeks")
    if not kinds:
        return None
    found = "; ".join(f"{m.check}: {m.detail}" for m in missed).replace('"', "'")
    parts = [
        template(
            "tests_header.py.txt",
            mandate_id=mandate.alert_id or "manual",
            module=mandate.module,
            imports=_imports(mandate, True, False),
            strategy=mandate.strategy,
            text=f"{mandate.text}\nCross-validation found what the first tests missed: {found}",
        ),
        template("tests_market.py.txt"),
    ]
    if "weeks" in kinds:
        rebalance = c.rebalance or "daily"
        scheduled = rebalance in PERIOD_KEYS
        parts.append(
            template(
                "tests_missed_weeks.py.txt",
                missed=found,
                max_weekly_turnover=limits(mandate)["max_weekly_turnover"],
                period=(SCHEDULES[rebalance]["period"] if scheduled else "session"),
                period_key=PERIOD_KEYS[rebalance] if scheduled else "day",
                max_trades=1,
            )
        )
    if "adv" in kinds:
        parts.append(
            template(
                "tests_missed_adv.py.txt",
                missed=found,
                max_adv_participation=c.max_adv_participation,
            )
        )
    return "".join(parts)


def pinned_tests(
    source: dict[str, str],
    tests: dict[str, str],
    mandate: Mandate,
    timeout_s: float = 300.0,
    unsafe_no_jail: bool = False,
) -> dict[str, str]:
    """Old tests that watch the unchanged strategy do what the mandate forbids.

    Maps node id -> the first breach seen, the reason. Node ids are without parametrized cases, as
    a mandate's `supersedes` names them. The offline Critic's rule for what a mandate supersedes.
    Runs the tests of `tests` against `source` as the gate runs tests. The test process and S's
    host are each in their jail. The mandate probe is loaded into the test process."""
    from guardrails.sandbox import GateDirs, SuiteRequest, run_suite
    from oomrl.portfolio.hosting import jail_lock

    lock, _ = jail_lock(unsafe_no_jail)
    dirs = GateDirs.create()
    try:
        ws = dirs.root / "author"
        for path, text in {**source, **tests}.items():
            (ws / path).parent.mkdir(parents=True, exist_ok=True)
            (ws / path).write_text(text, encoding="utf-8")
        from guardrails.sandbox import make_readable

        make_readable(ws)
        trees = tuple(sorted({path.split("/")[0] for path in tests}))
        sources = tuple(sorted({path.split("/")[0] for path in source}))
        probe = {
            "strategy": mandate.strategy,
            "constraints": mandate.constraints.model_dump(exclude_none=True),
        }
        suite = run_suite(
            lock,
            dirs,
            SuiteRequest(
                workspace=ws,
                tests=trees,
                tag="mandate-probe",
                sources=sources,
                plugins=((PROBE_PLUGIN, PROBE_FILE.read_text(encoding="utf-8"), probe),),
            ),
            timeout_s=timeout_s,
            memory_mb=4096,
        )
        if any(problem.rule == "run.timeout" for problem in suite.problems):
            raise OomrlError(
                f"offline Test Author: the workspace's tests did not finish within "
                f"{timeout_s:g} s under the mandate probe"
            )
        report = suite.reports.get(PROBE_PLUGIN)
        if not isinstance(report, dict):
            return {}
        pinned: dict[str, str] = {}
        for nodeid in sorted(report):
            breaches = report[nodeid] if isinstance(report[nodeid], list) else []
            pinned.setdefault(nodeid.split("[")[0], str(breaches[0]) if breaches else "")
        return pinned
    finally:
        dirs.remove()


def superseded_by_file(mandate: Mandate) -> dict[str, list[str]]:
    """The mandate's superseded tests as file -> names of module-level tests (what `supersede`
    rewrites)."""
    found: dict[str, list[str]] = {}
    for node_id in mandate.supersedes:
        path, _, name = node_id.partition("::")
        found.setdefault(path, []).append(name)
    return found


def supersede(test_source: str, names: list[str], mandate: Mandate) -> str:
    """Give the named tests new bodies that check the mandate; their names and signatures stay."""
    tree = ast.parse(test_source)
    edits = LineEdits(test_source)
    schedule = SCHEDULES.get(mandate.constraints.rebalance or "")
    bounds = limits(mandate)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name not in names:
            continue
        old_doc = (ast.get_docstring(node) or "the behaviour the mandate forbids").splitlines()[0]
        old_doc = old_doc.replace('"', "'").replace("\\", "/")
        segment = ast.get_source_segment(test_source, node) or ""
        common = {
            "mandate_id": mandate.alert_id or "manual",
            "strategy": mandate.strategy,
            "old_doc": old_doc,
        }
        if schedule and "rebalance_due" in segment:
            body = template("superseded_schedule.py.txt", **common, **schedule)
        else:
            body = template(
                "superseded_weights.py.txt",
                **common,
                turnover_limit=bounds["max_weekly_turnover"],
                adv_limit=bounds["max_adv_participation"],
            )
        edits.replace(node.body[0].lineno - 1, node.end_lineno or node.lineno, body)
    return edits.result()
