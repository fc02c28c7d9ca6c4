"""Child-side behaviour runner: the candidate called the way production calls it, outputs as JSON.

Runs inside a sandbox, either as its own process (`python -I -S -B behaviour.py SPEC`, no pytest
loaded: the production run) or from the gate's plugin inside a held-out pytest session. It
imports the workspace's own code by module name from the paths in the spec and imports nothing of
the gate or of oomrl. Two calling conventions:

- `call`: `entry(*args, **kwargs)` with JSON arguments (a plain function of S);
- `strategy`: as a replay decides a session: `strategy = entry(name)`,
  `strategy.target_weights(View(panels, as_of, portfolio_value=..., members=...), holdings,
  strategy.Params(**params))`, and `strategy.rebalance_due(day, last)` for each listed pair.

Every case is called `repeat` times in a row; each output is normalised to JSON so the judge
compares values, never objects.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from datetime import date
from pathlib import Path
from typing import Any


def _resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def normalise(value: Any, depth: int = 0) -> Any:
    """JSON-safe copy of an output: mappings, sequences, numbers (non-finite as text), text."""
    if depth > 20:
        return "<too deep>"
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) or type(value).__module__ == "numpy" and hasattr(value, "item"):
        number = value.item() if hasattr(value, "item") else value
        if isinstance(number, float) and not math.isfinite(number):
            return repr(number)
        return number
    if hasattr(value, "to_dict") and hasattr(value, "index"):  # a pandas Series
        value = value.to_dict()
    if isinstance(value, dict):
        return {str(k): normalise(v, depth + 1) for k, v in sorted(value.items(), key=_key)}
    if isinstance(value, (list, tuple)):
        return [normalise(v, depth + 1) for v in value]
    return {"<unserialisable>": type(value).__name__}


def _key(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _panels(raw: dict[str, Any]) -> dict[str, Any]:
    import pandas as pd

    return {name: pd.DataFrame(panel["data"], index=pd.to_datetime(panel["index"]),
                               columns=panel["columns"], dtype=float)
            for name, panel in raw.items()}


def _strategy_call(spec: dict[str, Any], case: dict[str, Any]) -> Any:
    strategy = _resolve(spec["entry"])(case["strategy"])
    if "rebalance" in case:
        return [bool(strategy.rebalance_due(date.fromisoformat(day),
                                            date.fromisoformat(last) if last else None))
                for day, last in case["rebalance"]]
    view_class = _resolve(spec.get("view", "strategies.base:MarketView"))
    extra = {} if case.get("members") is None else {"members": case["members"]}
    view = view_class(_panels(case["panels"]), case["as_of"],
                      portfolio_value=case.get("portfolio_value", 1.0), **extra)
    params = strategy.Params(**case.get("params", {}))
    return strategy.target_weights(view, dict(case.get("holdings", {})), params)


def _one(spec: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    try:
        if spec["convention"] == "strategy":
            value = _strategy_call(spec, case)
        else:
            value = _resolve(spec["entry"])(*case.get("args", []), **case.get("kwargs", {}))
        return {"ok": True, "value": normalise(value)}
    except Exception as exc:  # noqa: BLE001 - any exception is an observed behaviour, by type
        return {"ok": False, "error": type(exc).__name__}


def run_cases(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every case, called `repeat` times: [{"id", "calls": [output, ...]}]."""
    return [{"id": case["id"], "calls": [_one(spec, case) for _ in range(spec.get("repeat", 1))]}
            for case in spec["cases"]]


def main(spec_path: str) -> int:
    """The production run: cases from the spec, outputs to the spec's output file."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    sys.path[:0] = spec["paths"]
    outputs = run_cases(spec["behaviour"])
    Path(spec["output"]).write_text(json.dumps(outputs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    _spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    sys.path.extend(_spec["site"])
    sys.exit(main(sys.argv[1]))
