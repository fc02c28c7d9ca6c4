"""Calling strategy code through its host: the only way tests (and the engine) reach S.

Tests import this module, never S: `open_strategy(name, **params)` gives an object whose
`target_weights(panels, as_of=..., holdings=..., portfolio_value=..., members=...)` and
`rebalance_due(day, last)` are answered by the strategy host, where S runs in its jail;
`call("strategies.module:function", *args, **kwargs)` calls a plain function of S. Values cross as
plain data (numbers, strings, lists, dicts, arrays, dates; Series and DataFrames rebuilt here), and
an exception S raises comes back as a StrategyError that is also of its builtin type
(ValueError...). The gate (or the project's own test plugin) connects the channel before the tests
start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date
from typing import Any

from strategy_host.client import Channel, HostError, StrategyError

__all__ = ["HostError", "HostedStrategy", "StrategyError", "call", "connect", "open_strategy"]
_STATE: dict[str, Any] = {"channel": None, "context": "", "factory": None}


def connect(channel: Channel | None) -> None:
    """Use `channel` for every later call (None disconnects)."""
    _STATE["channel"] = channel


def connect_lazily(factory: Callable[[], Channel] | None) -> None:
    """Call `factory` for a channel when the first request needs one (a host starts only if
    used)."""
    _STATE["factory"] = factory


def set_context(name: str) -> None:
    """The name the host records coverage under (the gate's plugin sets the running test's id)."""
    _STATE["context"] = name


def _request(message: dict[str, Any]) -> dict[str, Any]:
    channel = _STATE["channel"]
    if channel is None and _STATE["factory"] is not None:
        channel = _STATE["channel"] = _STATE["factory"]()
    if channel is None:
        raise HostError(
            "no strategy host is connected: run these tests through the gate "
            "(`oomrl gate`) or the project's test suite, which connect one"
        )
    answer: dict[str, Any] = channel.request({**message, "ctx": _STATE["context"]})
    return answer


def _day(value: date | str | Any) -> int:
    import pandas as pd

    from strategy_host import wire

    return wire.day_ns(pd.Timestamp(value).date())


class HostedStrategy:
    """A strategy opened in the host with its parameters (validated there by its Params model)."""

    def __init__(self, name: str, params: Mapping[str, Any]) -> None:
        from strategy_host import wire

        answer = _request({"op": "open", "strategy": name, "params": wire.to_plain(dict(params))})
        self.handle = int(answer["handle"])
        self.name = str(answer["name"])
        self.params: dict[str, Any] = dict(wire.from_plain(answer.get("params") or {}))

    def rebalance_due(self, day: date | str, last_rebalance: date | str | None) -> bool:
        """Does the strategy want to trade on session `day`, having last traded on
        `last_rebalance`?"""
        import numpy as np

        answer = _request(
            {
                "op": "due",
                "handle": self.handle,
                "days": np.array([_day(day)], dtype="<i8"),
                "last": None if last_rebalance is None else _day(last_rebalance),
            }
        )
        return bool(answer["due"][0])

    def target_weights(
        self,
        panels: Mapping[str, Any],
        as_of: date | str | None = None,
        holdings: Mapping[str, float] | None = None,
        portfolio_value: float = 1.0,
        members: Iterable[str] | None = None,
    ) -> dict[str, float]:
        """The weights the strategy targets on `as_of` (default: the last row) from these panels.

        Only rows up to `as_of` are sent: the strategy never sees a later one.
        """
        import numpy as np
        import pandas as pd

        close = panels["close"]
        index = pd.DatetimeIndex(close.index)
        stamp = index[-1] if as_of is None else pd.Timestamp(as_of).normalize()
        rows = int(index.searchsorted(stamp, side="right"))
        columns = [str(c) for c in close.columns]
        values = {
            str(f): p.reindex(index=index[:rows], columns=close.columns).to_numpy(dtype="<f8")
            for f, p in panels.items()
        }
        held = dict(holdings or {})
        answer = _request(
            {
                "op": "decide",
                "handle": self.handle,
                "market": {"symbols": columns, "fields": list(values), "capacity": max(rows, 1)},
                "rows": {
                    "days": index[:rows].values.astype("datetime64[ns]").astype("<i8"),
                    "values": values,
                },
                "as_of": _day(stamp),
                "portfolio_value": float(portfolio_value),
                "holdings": {
                    "names": [str(s) for s in held],
                    "w": np.array(list(held.values()), dtype="<f8"),
                },
                "members": None if members is None else [str(m) for m in members],
            }
        )
        return weights_of(answer, columns)


def weights_of(answer: dict[str, Any], symbols: list[str]) -> dict[str, float]:
    """The weights of a decide answer as a dict, in the order the strategy gave them."""
    import numpy as np

    idx, weights, unknown = answer.get("idx"), answer.get("w"), answer.get("unknown")
    if not (
        isinstance(idx, np.ndarray)
        and isinstance(weights, np.ndarray)
        and idx.dtype.str == "<i8"
        and weights.dtype.str == "<f8"
        and len(idx) == len(weights)
        and isinstance(unknown, list)
        and len(unknown) == int((idx < 0).sum())
        and all(isinstance(u, str) for u in unknown)
        and not (idx >= len(symbols)).any()
    ):
        raise HostError("the strategy host answered a decision with malformed weights")
    extra = iter(unknown)
    return {
        (symbols[i] if i >= 0 else next(extra)): w
        for i, w in zip(idx.tolist(), weights.tolist(), strict=True)
    }


def open_strategy(name: str, /, **params: Any) -> HostedStrategy:
    """Open strategy `name` (the module strategies/<name>.py's STRATEGY) with these parameters."""
    return HostedStrategy(name, params)


def call(target: str, /, *args: Any, **kwargs: Any) -> Any:
    """Call a public function of S (`"strategies.module:function"`) with plain-data arguments."""
    from strategy_host import wire

    answer = _request(
        {
            "op": "call",
            "target": target,
            "args": wire.to_plain(list(args)),
            "kwargs": wire.to_plain(kwargs),
        }
    )
    return wire.from_plain(answer.get("value"))
