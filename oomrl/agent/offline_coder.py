"""The offline Coder's rule: rewrite a strategy module to meet a mandate (constraint params,
schedule, limits)."""

from __future__ import annotations

import ast

from oomrl.agent.offline_common import SCHEDULES, LineEdits, limits, template
from oomrl.agent.roles import Mandate


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


API_IMPORT = "from strategy_api import"


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _ensure_imports(tree: ast.Module, edits: LineEdits, needed: dict[str, str]) -> None:
    """Add import lines for the names in `needed` (name -> import statement) not yet bound."""
    missing = [stmt for name, stmt in needed.items() if name not in _imported(tree)]
    # The strategy API's import line (`from strategy_api import ...`; `.base` in older versions).
    base = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.ImportFrom)
            and n.lineno == n.end_lineno
            and (n.module == "strategy_api" or (n.module or "").endswith("base"))
        ),
        None,
    )
    extra_base = [
        name
        for name, stmt in needed.items()
        if name not in _imported(tree) and stmt.startswith(API_IMPORT)
    ]
    if base is not None and extra_base:
        names = sorted({a.name for a in base.names} | set(extra_base))
        prefix = "." * base.level + (base.module or "")
        edits.replace(base.lineno - 1, base.lineno, f"from {prefix} import {', '.join(names)}\n")
        missing = [s for s in missing if not s.startswith(API_IMPORT)]
    if missing:
        # After the last absolute import, so third-party imports stay above the package's own.
        absolute = [
            n
            for n in tree.body
            if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.level == 0)
        ]
        last = max((n.end_lineno or n.lineno for n in absolute), default=0)
        edits.insert(last, "".join(s + "\n" for s in missing))


def reference_change(source: str, mandate: Mandate) -> str:
    """The module rewritten to meet the mandate: constraint params, schedule, limited trading."""
    tree = ast.parse(source)
    params, strategy = _classes(tree)
    if params is None or strategy is None:
        raise ValueError(
            f"{mandate.module} has no StrategyParams subclass and strategy class "
            "with rebalance_due and target_weights; the offline Coder cannot change it"
        )
    edits = LineEdits(source)
    mandate_id = mandate.alert_id or "manual"
    fields = {
        n.target.id
        for n in params.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    wanted = {"adv_window", "max_adv_participation", "max_weekly_turnover"}
    if not wanted <= fields:
        block = template("coder_params.py.txt", adv_window=20, **limits(mandate))
        kept = [
            line
            for line in block.splitlines(keepends=True)
            if line.split(":")[0].strip() not in fields
        ]
        edits.insert(params.end_lineno or params.lineno, "".join(kept))
    needed = {
        "Mapping": "from collections.abc import Mapping",
        "pd": "import pandas as pd",
        "Field": "from pydantic import Field",
    }
    methods = {n.name: n for n in strategy.body if isinstance(n, ast.FunctionDef)}
    schedule = SCHEDULES.get(mandate.constraints.rebalance or "")
    if schedule:
        due = methods["rebalance_due"]
        edits.replace(
            due.body[0].lineno - 1,
            due.end_lineno or due.lineno,
            template("coder_schedule.py.txt", mandate_id=mandate_id, **schedule),
        )
        if "iso_week" in schedule["day_key"]:
            needed["iso_week"] = f"{API_IMPORT} iso_week"
    target = methods["target_weights"]
    if "_ideal_weights" not in methods:
        first = min([target.lineno] + [d.lineno for d in target.decorator_list]) - 1
        edits.replace(
            target.lineno - 1,
            target.lineno,
            source.splitlines(keepends=True)[target.lineno - 1].replace(
                "def target_weights(", "def _ideal_weights(", 1
            ),
        )
        edits.insert(first, template("coder_target_weights.py.txt"))
        anchor = next(
            (
                n.lineno - 1
                for n in tree.body
                if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "STRATEGY" for t in n.targets)
            ),
            len(edits.lines),
        )
        edits.insert(anchor, template("coder_limit_trading.py.txt", params_class=params.name))
    _ensure_imports(tree, edits, needed)
    return edits.result()
