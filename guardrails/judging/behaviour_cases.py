"""Behaviour cases through the production calling convention: the parent calls a fresh host.

The gate (trusted) is the caller here, exactly as the engine is in production. The candidate runs
in its own host, the jail every caller of S uses. It never sees pytest. Two calling conventions:

- `call`: `entry(*args, **kwargs)` with JSON arguments (a plain function of S).
- `strategy`: as a replay decides a session. The strategy `case["strategy"]` is opened with its
  params. `target_weights` is called over the case's panels (rows up to `as_of` only), holdings,
  portfolio value and members. `rebalance_due(day, last)` is called for each listed pair.

Every case is called `repeat` times in a row. Outputs are built from the plain data the host sent
(decoded here). They are exact dicts, lists, numbers and strings, never the candidate's own objects.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import numpy as np

from strategy_host import wire
from strategy_host.client import StrategyError


def normalise(value: Any, depth: int = 0) -> Any:
    """JSON-safe copy of a decoded output: mappings, sequences, numbers (non-finite as text), text.

    Exact types only (`type(x) is ...`, never isinstance). The judge builds the plain values
    itself from what the wire decoder made. Anything else is reported by its type name.
    """
    if depth > 20:
        return "<too deep>"
    kind = type(value)
    if value is None or kind in (bool, str, int):
        return value
    if kind is float:
        return value if math.isfinite(value) else repr(value)
    if kind is np.ndarray and value.dtype.str in ("<f8", "<i8", "|b1"):
        return [normalise(v, depth + 1) for v in value.tolist()]
    if kind.__name__ == "Series" and kind.__module__.startswith("pandas"):  # the decoder's own
        value, kind = dict(zip(value.index.tolist(), value.tolist(), strict=True)), dict
    if kind is dict:
        return {
            str(k): normalise(v, depth + 1)
            for k, v in sorted(value.items(), key=lambda i: str(i[0]))
        }
    if kind is list:
        return [normalise(v, depth + 1) for v in value]
    if kind in (date, datetime):
        return value.isoformat()
    return {"<unserialisable>": kind.__name__}


def _panels(raw: dict[str, Any]) -> dict[str, Any]:
    import pandas as pd

    return {
        name: pd.DataFrame(
            panel["data"],
            index=pd.to_datetime(panel["index"]),
            columns=panel["columns"],
            dtype=float,
        )
        for name, panel in raw.items()
    }


def _strategy_call(request: Any, case: dict[str, Any]) -> Any:
    import pandas as pd

    from strategy_host import weights_of

    opened = request(
        {
            "op": "open",
            "strategy": case["strategy"],
            "params": wire.to_plain(case.get("params", {})),
        }
    )
    handle = opened["handle"]
    if "rebalance" in case:
        found = []
        for day, last in case["rebalance"]:
            answer = request(
                {
                    "op": "due",
                    "handle": handle,
                    "days": np.array([wire.day_ns(date.fromisoformat(day))], dtype="<i8"),
                    "last": None if last is None else wire.day_ns(date.fromisoformat(last)),
                }
            )
            found.append(bool(answer["due"][0]))
        return found
    panels = _panels(case["panels"])
    close = panels["close"]
    stamp = pd.Timestamp(case["as_of"]).normalize()
    rows = int(pd.DatetimeIndex(close.index).searchsorted(stamp, side="right"))
    columns = [str(c) for c in close.columns]
    held = dict(case.get("holdings", {}))
    answer = request(
        {
            "op": "decide",
            "handle": handle,
            "market": {"symbols": columns, "fields": list(panels), "capacity": max(rows, 1)},
            "rows": {
                "days": close.index[:rows].values.astype("datetime64[ns]").astype("<i8"),
                "values": {
                    f: p.reindex(columns=close.columns).to_numpy(dtype="<f8")[:rows]
                    for f, p in panels.items()
                },
            },
            "as_of": wire.day_ns(stamp.date()),
            "portfolio_value": float(case.get("portfolio_value", 1.0)),
            "holdings": {
                "names": [str(s) for s in held],
                "w": np.array(list(held.values()), dtype="<f8"),
            },
            "members": case.get("members"),
        }
    )
    return weights_of(answer, columns)


def _one(request: Any, spec: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    try:
        if spec["convention"] == "strategy":
            value = _strategy_call(request, case)
        else:
            answer = request(
                {
                    "op": "call",
                    "target": spec["entry"],
                    "args": wire.to_plain(case.get("args", [])),
                    "kwargs": wire.to_plain(case.get("kwargs", {})),
                }
            )
            value = wire.from_plain(answer.get("value"))
        return {"ok": True, "value": normalise(value)}
    except StrategyError as exc:  # an exception is an observed behaviour, by type
        return {"ok": False, "error": exc.type_name}


def run_cases(request: Any, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every case through `request` (a host's), called `repeat` times: [{"id", "calls": [...]}]."""
    return [
        {
            "id": case["id"],
            "calls": [_one(request, spec, case) for _ in range(spec.get("repeat", 1))],
        }
        for case in spec["cases"]
    ]
