"""The behaviour runner (the gate calls a fresh strategy host, as production does) and the red-test
'about S' analysis (S's values reach a test through strategy_host)."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from guardrails.judging import behaviour_cases as behaviour
from guardrails.judging import behaviour_check
from guardrails.judging.redgreen import SourceValues, about_source, red_violations, source_fixtures
from guardrails.sandbox.bwrap import BwrapLock
from guardrails.sandbox.locks import HashOnlyLock
from guardrails.sandbox.runner import SuiteResult
from guardrails.sandbox.strategyhost import HostProcess, HostSpec, start_host
from strategy_host import wire

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("strategies", "strategy_host")  # what the gate passes: S's packages and the client


def _panel(frame: pd.DataFrame) -> dict[str, object]:
    return {
        "index": [d.date().isoformat() for d in frame.index],
        "columns": list(frame.columns),
        "data": frame.to_numpy().tolist(),
    }


def strategy_case() -> dict[str, object]:
    index = pd.bdate_range("2024-05-01", periods=30)
    rates = {"A": 0.02, "B": 0.01, "C": -0.01}
    close = pd.DataFrame(
        {s: 10.0 * (1 + r) ** np.arange(30) for s, r in rates.items()}, index=index
    )
    amount = pd.DataFrame(5e8, index=index, columns=list(rates))
    return {
        "id": "weekly",
        "strategy": "weekly_liquidity",
        "as_of": index[-1].date().isoformat(),
        "panels": {
            "close": _panel(close),
            "volume": _panel(close * 0 + 1e6),
            "amount": _panel(amount),
        },
        "holdings": {"C": 0.2},
        "portfolio_value": 1e7,
        "params": {"top_k": 2, "lookback": 5, "skip": 0, "adv_window": 5},
    }


@pytest.fixture(scope="module")
def repository_host() -> Iterator[HostProcess]:
    """A host over the repository's strategies, in the jail the gate's behaviour run uses."""
    lock = BwrapLock() if BwrapLock.available() is None else HashOnlyLock()
    with start_host(lock, HostSpec(REPO)) as host:
        yield host


@pytest.mark.slow
def test_the_production_convention_calls_the_repository_strategy(
    repository_host: HostProcess,
) -> None:
    spec = {
        "convention": "strategy",
        "entry": "strategies.registry:get",
        "repeat": 2,
        "cases": [
            strategy_case(),
            {
                "id": "due",
                "strategy": "weekly_liquidity",
                "rebalance": [
                    ["2024-07-08", "2024-07-05"],
                    ["2024-07-05", "2024-07-01"],
                    ["2024-07-01", None],
                ],
            },
            {"id": "bad", "strategy": "no_such_strategy"},
            {
                "id": "params",
                "strategy": "weekly_liquidity",
                "params": {"top_k": 0},
                "rebalance": [["2024-07-08", None]],
            },
        ],
    }
    outputs = {o["id"]: o["calls"] for o in behaviour.run_cases(repository_host.request, spec)}
    weights = outputs["weekly"][0]["value"]
    assert outputs["weekly"][0]["ok"] and outputs["weekly"][0] == outputs["weekly"][1]
    assert set(weights) <= {"A", "B", "C"} and 0 < sum(weights.values()) <= 1
    assert outputs["due"][0]["value"] == [True, False, True]
    assert outputs["bad"][0] == {"ok": False, "error": "KeyError"}
    assert outputs["params"][0] == {"ok": False, "error": "ValidationError"}  # S's Params refuse it


@pytest.mark.slow
def test_the_call_convention_gets_plain_values_back(repository_host: HostProcess) -> None:
    spec = {
        "convention": "call",
        "entry": "strategies.registry:names",
        "repeat": 1,
        "cases": [{"id": "names"}, {"id": "wrong", "args": [1, 2, 3]}],
    }
    outputs = {o["id"]: o["calls"] for o in behaviour.run_cases(repository_host.request, spec)}
    assert outputs["names"] == [{"ok": True, "value": ["daily_momentum", "weekly_liquidity"]}]
    assert outputs["wrong"] == [{"ok": False, "error": "TypeError"}]


def test_outputs_are_normalised_to_json() -> None:
    # what the host sends, as the gate decodes it (arrays, tables, dates, non-finite floats)
    sent: dict[str, Any] = {
        "b": np.float64(0.5),
        "a": [np.int64(2), float("nan"), True, None, "x"],
        "s": pd.Series({"Z": 1.0}),
        "d": date(2024, 7, 1),
        "arr": np.array([1.5, np.inf]),
        "ints": np.array([3, 4]),
        "f": pd.DataFrame({"c": [1.0]}),
    }
    value = wire.from_plain(wire.decode(wire.encode({"v": wire.to_plain(sent)})[4:])["v"])
    assert behaviour.normalise(value) == {
        "a": [2, "nan", True, None, "x"],
        "arr": [1.5, "inf"],
        "b": 0.5,
        "d": "2024-07-01",
        "f": {"<unserialisable>": "DataFrame"},
        "ints": [3, 4],
        "s": {"Z": 1.0},
    }
    deep: list[object] = []
    cursor = deep
    for _ in range(30):
        cursor.append([])
        cursor = cursor[0]  # type: ignore[assignment]
    assert "<too deep>" in json.dumps(behaviour.normalise(deep))
    assert math.isnan(float(behaviour.normalise(float("nan"))))


TESTS = '''import pytest
import strategy_host
from strategy_host import call

MOMENTUM = "strategies.momentum:target_weights"


def target_weights(scores, k):
    return call(MOMENTUM, scores, k)


@pytest.fixture
def weights():
    return target_weights({"A": 1.0}, 1)


def check(w, want):
    assert w == want


def test_direct():
    assert target_weights({"A": 1.0}, 1) == {"A": 0.5}


def test_via_name():
    w = strategy_host.call(MOMENTUM, {"A": 1.0}, 1)
    scaled = {k: v * 2 for k, v in w.items()}
    assert scaled["A"] == 1.0


def test_fixture(weights, universe):
    assert weights == {"A": 2.0}
    assert universe["A"] == 3


def test_helper():
    check(target_weights({"A": 1.0}, 1), {})


def test_raises():
    with pytest.raises(ValueError):
        target_weights({"A": 1.0}, 0)


def test_other(universe):
    assert universe["A"] == 3
'''


def test_red_assertions_must_involve_values_from_the_source() -> None:
    tree = ast.parse(TESTS)
    values = SourceValues(tree, PACKAGES, {"universe_from_s"})
    lines = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    line = {name: lines[name].body[-1].lineno for name in lines}
    assert about_source(tree, line["test_direct"], values)
    assert about_source(tree, line["test_via_name"], values)
    assert about_source(tree, lines["test_fixture"].body[0].lineno, values)
    assert not about_source(tree, lines["test_fixture"].body[1].lineno, values)
    assert about_source(tree, lines["check"].body[0].lineno, values)  # a helper's own assert
    assert about_source(tree, line["test_raises"] + 1, values)  # DID NOT RAISE: the with body
    assert not about_source(tree, line["test_other"], values)
    assert not about_source(tree, 1000, values)
    assert source_fixtures(tree, PACKAGES) == {"weights", "target_weights"}


RIDERS = '''from strategy_host import call, open_strategy

DOC = "Equal-weight the top_k highest-scoring assets."
T = "strategies.momentum:target_weights"


def test_rides_along():
    w = call(T, {"A": 1.0}, top_k=1)
    assert w and "ties" in DOC


def test_in_the_message_only():
    w = call(T, {"A": 1.0}, top_k=1)
    assert "ties" in DOC, w


def test_dunder():
    assert "ties" in call(T, {"A": 1.0}, top_k=1).__doc__


def test_proxy_params():
    strategy = open_strategy("momentum")
    assert strategy.params["top_k"] == 3


def test_proxy_name():
    assert open_strategy("momentum").name == "momentum_v2"


def test_every_part_about_s():
    w = call(T, {"A": 1.0}, top_k=1)
    assert w and w["A"] == 1.0


def test_a_method_of_the_proxy():
    strategy = open_strategy("momentum")
    assert strategy.rebalance_due("2024-01-02", None) and strategy.target_weights({}) == {}
'''


def test_docstrings_attributes_and_riders_are_not_about_the_source() -> None:
    tree = ast.parse(RIDERS)
    values = SourceValues(tree, PACKAGES)
    last = {
        node.name: node.body[-1].lineno for node in tree.body if isinstance(node, ast.FunctionDef)
    }
    about = {name for name, line in last.items() if about_source(tree, line, values)}
    assert about == {"test_every_part_about_s", "test_a_method_of_the_proxy"}


def test_red_violations_read_the_failing_line_and_conftest_fixtures(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import pytest\nfrom strategy_host import call\n\n\n@pytest.fixture\n"
        "def chosen():\n    return call('strategies.momentum:target_weights', {'A': 1.0}, 1)\n"
    )
    (tmp_path / "tests" / "test_r.py").write_text(
        "def test_a(chosen):\n    assert chosen == {}\n\n\ndef test_b(universe):\n"
        "    assert universe == {}\n"
    )
    suite = SuiteResult(
        outcomes={
            "tests/test_r.py::test_a": {
                "outcome": "failed",
                "assertion": True,
                "where": ["tests/test_r.py", 2],
            },
            "tests/test_r.py::test_b": {
                "outcome": "failed",
                "assertion": True,
                "where": ["tests/test_r.py", 6],
            },
            "tests/test_r.py::test_c": {"outcome": "failed", "assertion": True, "where": None},
            "tests/test_r.py::test_d": {"outcome": "error"},
        }
    )
    ids = [
        "tests/test_r.py::test_a",
        "tests/test_r.py::test_b",
        "tests/test_r.py::test_c",
        "tests/test_r.py::test_d",
    ]
    found = red_violations(suite, ids, tmp_path, PACKAGES)
    assert [v.message.split(":")[2] for v in found] == ["test_b", "test_c"]
    assert all(v.rule == "redgreen.not_about_source" for v in found)


class _Lying(dict):  # type: ignore[type-arg]
    """Holds wrong weights, reports honest ones through every method it overrides."""

    def items(self):  # type: ignore[no-untyped-def]
        return [("A", 0.5), ("B", 0.5)]

    def to_dict(self) -> dict[str, float]:
        return {"A": 0.5, "B": 0.5}


class _LyingFloat(float):
    def __float__(self) -> float:
        return 0.5


class _DuckWeights:
    def to_dict(self) -> dict[str, float]:
        return {"A": 0.5}


def test_what_crosses_is_what_the_object_holds_never_what_its_methods_report() -> None:
    assert wire.to_plain(_Lying(A=2.0, B=2.0)) == {"A": 2.0, "B": 2.0}
    assert type(wire.to_plain(_LyingFloat(2.0))) is float and wire.to_plain(_LyingFloat(2.0)) == 2.0
    # The host's weights
    assert wire.held_float(_LyingFloat(2.0)) == 2.0 and wire.held_float(np.float64(0.25)) == 0.25
    with pytest.raises(TypeError, match="_DuckWeights cannot cross the wire"):
        wire.to_plain({"w": _DuckWeights()})


def test_the_judge_keeps_exact_plain_values_only() -> None:
    assert behaviour.normalise(_Lying(A=2.0)) == {"<unserialisable>": "_Lying"}
    assert behaviour.normalise(_LyingFloat(2.0)) == {"<unserialisable>": "_LyingFloat"}
    assert behaviour.normalise(np.array(["a"])) == {"<unserialisable>": "ndarray"}
    inputs = {
        "cases": [{"id": c} for c in ("bool", "nan", "inf", "duck", "fine")],
        "properties": ["weights"],
    }
    values = {
        "bool": {"A": True},
        "nan": {"A": "nan"},
        "inf": {"A": "inf"},
        "duck": {"<unserialisable>": "_DuckWeights"},
        "fine": {"A": 0.5, "B": 0},
    }
    found = behaviour_check.behaviour_violations(
        inputs, [{"id": c, "calls": [{"ok": True, "value": v}]} for c, v in values.items()]
    )
    assert [(v.rule, v.message.split(":")[0]) for v in found] == [
        ("behaviour.property", f"behaviour case {c}") for c in ("bool", "nan", "inf", "duck")
    ]
