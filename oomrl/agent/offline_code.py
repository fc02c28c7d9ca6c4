"""The offline provider's code rules: a Coder that rewrites a strategy module to meet a mandate, and the tests for it."""

from __future__ import annotations

import ast
import difflib
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from string import Template

from oomrl.agent import PROMPTS_DIR
from oomrl.agent.roles import Mandate

SCHEDULES: dict[str, dict[str, str]] = {
    "weekly": {"rebalance": "weekly", "period": "week", "first": "2024-07-01", "second": "2024-07-02",
               "same": '"2024-07-02", "2024-07-03", "2024-07-05"', "next": "2024-07-08",
               "last": "2024-07-05", "day_key": "iso_week(day)",
               "last_key": "iso_week(last_rebalance)"},
    "biweekly": {"rebalance": "biweekly", "period": "fortnight", "first": "2024-07-01",
                 "second": "2024-07-08", "same": '"2024-07-02", "2024-07-08", "2024-07-12"',
                 "next": "2024-07-15", "last": "2024-07-12",
                 "day_key": "(iso_week(day)[0], (iso_week(day)[1] - 1) // 2)",
                 "last_key": "(iso_week(last_rebalance)[0], (iso_week(last_rebalance)[1] - 1) // 2)"},
    "monthly": {"rebalance": "monthly", "period": "month", "first": "2024-07-01", "second": "2024-07-15",
                "same": '"2024-07-15", "2024-07-31"', "next": "2024-08-01", "last": "2024-07-31",
                "day_key": "(day.year, day.month)",
                "last_key": "(last_rebalance.year, last_rebalance.month)"},
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
    lines = difflib.unified_diff(before, new.splitlines(keepends=True),
                                 fromfile=f"a/{path}" if old is not None else "/dev/null",
                                 tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)


def limits(mandate: Mandate) -> dict[str, float]:
    """The mandate's ADV and turnover limits, open where it sets none."""
    c = mandate.constraints
    return {"max_adv_participation": c.max_adv_participation or OPEN_LIMITS["max_adv_participation"],
            "max_weekly_turnover": c.max_weekly_turnover or OPEN_LIMITS["max_weekly_turnover"]}


# -- the Coder's rule ------------------------------------------------------------------------------
class _Edits:
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


def _classes(tree: ast.Module) -> tuple[ast.ClassDef | None, ast.ClassDef | None]:
    """The Params class (a StrategyParams subclass) and the strategy class of a module."""
    params = strategy = None
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
        methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        if "StrategyParams" in bases:
            params = node
        elif {"rebalance_due", "target_weights"} <= methods:
            strategy = node
    return params, strategy


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _ensure_imports(tree: ast.Module, edits: _Edits, needed: dict[str, str]) -> None:
    """Add import lines for the names in `needed` (name -> import statement) not yet bound."""
    missing = [stmt for name, stmt in needed.items() if name not in _imported(tree)]
    base = next((n for n in tree.body if isinstance(n, ast.ImportFrom)
                 and (n.module or "").endswith("base") and n.lineno == n.end_lineno), None)
    extra_base = [name for name, stmt in needed.items()
                  if name not in _imported(tree) and stmt.startswith("from .base")]
    if base is not None and extra_base:
        names = sorted({a.name for a in base.names} | set(extra_base))
        prefix = "." * base.level + (base.module or "")
        edits.replace(base.lineno - 1, base.lineno, f"from {prefix} import {', '.join(names)}\n")
        missing = [s for s in missing if not s.startswith("from .base")]
    if missing:
        # After the last absolute import, so third-party imports stay above the package's own.
        absolute = [n for n in tree.body if isinstance(n, ast.Import)
                    or (isinstance(n, ast.ImportFrom) and n.level == 0)]
        last = max((n.end_lineno or n.lineno for n in absolute), default=0)
        edits.insert(last, "".join(s + "\n" for s in missing))


def reference_change(source: str, mandate: Mandate) -> str:
    """The module rewritten to meet the mandate: constraint params, schedule, limited trading."""
    tree = ast.parse(source)
    params, strategy = _classes(tree)
    if params is None or strategy is None:
        raise ValueError(f"{mandate.module} has no StrategyParams subclass and strategy class "
                         "with rebalance_due and target_weights; the offline Coder cannot change it")
    edits = _Edits(source)
    mandate_id = mandate.alert_id or "manual"
    fields = {n.target.id for n in params.body
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    wanted = {"adv_window", "max_adv_participation", "max_weekly_turnover"}
    if not wanted <= fields:
        block = template("coder_params.py.txt", adv_window=20, **limits(mandate))
        kept = [line for line in block.splitlines(keepends=True)
                if line.split(":")[0].strip() not in fields]
        edits.insert(params.end_lineno or params.lineno, "".join(kept))
    needed = {"Mapping": "from collections.abc import Mapping", "pd": "import pandas as pd",
              "Field": "from pydantic import Field"}
    methods = {n.name: n for n in strategy.body if isinstance(n, ast.FunctionDef)}
    schedule = SCHEDULES.get(mandate.constraints.rebalance or "")
    if schedule:
        due = methods["rebalance_due"]
        edits.replace(due.body[0].lineno - 1, due.end_lineno or due.lineno,
                      template("coder_schedule.py.txt", mandate_id=mandate_id, **schedule))
        if "iso_week" in schedule["day_key"]:
            needed["iso_week"] = "from .base import iso_week"
    target = methods["target_weights"]
    if "_ideal_weights" not in methods:
        first = min([target.lineno] + [d.lineno for d in target.decorator_list]) - 1
        edits.replace(target.lineno - 1, target.lineno,
                      source.splitlines(keepends=True)[target.lineno - 1].replace(
                          "def target_weights(", "def _ideal_weights(", 1))
        edits.insert(first, template("coder_target_weights.py.txt"))
        anchor = next((n.lineno - 1 for n in tree.body if isinstance(n, ast.Assign)
                       and any(isinstance(t, ast.Name) and t.id == "STRATEGY" for t in n.targets)),
                      len(edits.lines))
        edits.insert(anchor, template("coder_limit_trading.py.txt", params_class=params.name))
    _ensure_imports(tree, edits, needed)
    return edits.result()


# -- the Test Author's rules ---------------------------------------------------------------------
def mandate_tests(mandate: Mandate) -> str:
    """A new test module encoding every constraint of the mandate (red on the old code)."""
    c = mandate.constraints
    schedule = SCHEDULES.get(c.rebalance or "")
    market = c.max_adv_participation is not None or c.max_weekly_turnover is not None
    imports = ([f"from {mandate.module} import STRATEGY"] if not market else
               ["import numpy as np", "import pandas as pd", "",
                "from strategies.base import MarketView", f"from {mandate.module} import STRATEGY"])
    if schedule:
        imports = ["from datetime import date", ""] + imports
    parts = [template("tests_header.py.txt", mandate_id=mandate.alert_id or "manual",
                      module=mandate.module, text=mandate.text, imports="\n".join(imports))]
    if schedule:
        parts.append(template("tests_schedule.py.txt", **schedule))
    if market:
        parts.append(template("tests_market.py.txt"))
    if c.max_adv_participation is not None:
        parts.append(template("tests_adv.py.txt", max_adv_participation=c.max_adv_participation))
    if c.max_weekly_turnover is not None:
        parts.append(template("tests_turnover.py.txt", max_weekly_turnover=c.max_weekly_turnover))
    return "".join(parts)


def contradicted_tests(workspace: Path, module_path: str, new_source: str) -> dict[str, list[str]]:
    """Tests that fail once the module meets the mandate: file -> test function names.

    Found by running the existing tests against the Coder's reference change in a scratch copy."""
    scratch = Path(tempfile.mkdtemp(prefix="oomrl-offline-"))
    try:
        shutil.copytree(workspace, scratch / "ws", ignore=shutil.ignore_patterns(".git", "__pycache__"))
        (scratch / "ws" / module_path).write_text(new_source, encoding="utf-8")
        report = scratch / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-o", "addopts=", f"--junitxml={report}", "tests"],
                       cwd=scratch / "ws", capture_output=True, timeout=300, check=False,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(scratch / "ws"),
                            "PYTHONDONTWRITEBYTECODE": "1"})
        failed: dict[str, list[str]] = {}
        if not report.exists():
            return failed
        for case in ET.parse(report).getroot().iter("testcase"):
            if case.find("failure") is None and case.find("error") is None:
                continue
            path = case.get("classname", "").replace(".", "/") + ".py"
            failed.setdefault(path, []).append(case.get("name", "").split("[")[0])
        return failed
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def supersede(test_source: str, names: list[str], mandate: Mandate) -> str:
    """Give the named tests new bodies that check the mandate; their names and signatures stay."""
    tree = ast.parse(test_source)
    edits = _Edits(test_source)
    schedule = SCHEDULES.get(mandate.constraints.rebalance or "")
    bounds = limits(mandate)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name not in names:
            continue
        old_doc = (ast.get_docstring(node) or "the behaviour the mandate forbids").splitlines()[0]
        old_doc = old_doc.replace('"', "'").replace("\\", "/")
        segment = ast.get_source_segment(test_source, node) or ""
        common = {"mandate_id": mandate.alert_id or "manual", "module": mandate.module,
                  "old_doc": old_doc}
        if schedule and "rebalance_due" in segment:
            body = template("superseded_schedule.py.txt", **common, **schedule)
        else:
            body = template("superseded_weights.py.txt", **common,
                            turnover_limit=bounds["max_weekly_turnover"],
                            adv_limit=bounds["max_adv_participation"])
        edits.replace(node.body[0].lineno - 1, node.end_lineno or node.lineno, body)
    return edits.result()
