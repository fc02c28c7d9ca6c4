"""The behaviour runner (production calling convention) and the red-test 'about S' analysis."""

from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from guardrails import behaviour
from guardrails.redgreen import SourceValues, about_source, red_violations, source_fixtures
from guardrails.runner import SuiteResult


def _panel(frame: pd.DataFrame) -> dict[str, object]:
    return {"index": [d.date().isoformat() for d in frame.index], "columns": list(frame.columns),
            "data": frame.to_numpy().tolist()}


def strategy_case() -> dict[str, object]:
    index = pd.bdate_range("2024-05-01", periods=30)
    rates = {"A": 0.02, "B": 0.01, "C": -0.01}
    close = pd.DataFrame({s: 10.0 * (1 + r) ** np.arange(30) for s, r in rates.items()},
                         index=index)
    amount = pd.DataFrame(5e8, index=index, columns=list(rates))
    return {"id": "weekly", "strategy": "weekly_liquidity", "as_of": index[-1].date().isoformat(),
            "panels": {"close": _panel(close), "volume": _panel(close * 0 + 1e6),
                       "amount": _panel(amount)},
            "holdings": {"C": 0.2}, "portfolio_value": 1e7,
            "params": {"top_k": 2, "lookback": 5, "skip": 0, "adv_window": 5}}


def test_the_production_convention_calls_the_repository_strategy() -> None:
    spec = {"convention": "strategy", "entry": "strategies.registry:get", "repeat": 2,
            "cases": [strategy_case(),
                      {"id": "due", "strategy": "weekly_liquidity",
                       "rebalance": [["2024-07-08", "2024-07-05"], ["2024-07-05", "2024-07-01"],
                                     ["2024-07-01", None]]},
                      {"id": "bad", "strategy": "no_such_strategy"}]}
    outputs = {o["id"]: o["calls"] for o in behaviour.run_cases(spec)}
    weights = outputs["weekly"][0]["value"]
    assert outputs["weekly"][0]["ok"] and outputs["weekly"][0] == outputs["weekly"][1]
    assert set(weights) <= {"A", "B", "C"} and 0 < sum(weights.values()) <= 1
    assert outputs["due"][0]["value"] == [True, False, True]
    assert outputs["bad"][0] == {"ok": False, "error": "KeyError"}


def test_outputs_are_normalised_to_json() -> None:
    value = {"b": np.float64(0.5), "a": [np.int64(2), float("nan"), True, None, "x"],
             "s": pd.Series({"Z": 1.0}), "o": object()}
    assert behaviour.normalise(value) == {
        "a": [2, "nan", True, None, "x"], "b": 0.5, "o": {"<unserialisable>": "object"},
        "s": {"Z": 1.0}}
    deep: list[object] = []
    cursor = deep
    for _ in range(30):
        cursor.append([])
        cursor = cursor[0]  # type: ignore[assignment]
    assert "<too deep>" in json.dumps(behaviour.normalise(deep))
    assert math.isnan(float(behaviour.normalise(np.float32("nan"))))


def test_the_plain_process_entry_point_writes_its_outputs(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "calc.py").write_text("def double(x):\n    return {'v': 2 * x}\n")
    spec = {"paths": [str(tmp_path)], "output": str(tmp_path / "out.json"),
            "behaviour": {"convention": "call", "entry": "pkg.calc:double",
                          "cases": [{"id": "two", "args": [2]}]}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    # Alike test_runner.py's in-process childrun test: each entry point runs in this process
    # (for coverage) and must give sys.path back; two different programs, one call each.
    before = list(sys.path)
    try:
        assert behaviour.main(str(tmp_path / "spec.json")) == 0
    finally:
        sys.path[:] = before
        for name in ("pkg", "pkg.calc"):
            sys.modules.pop(name, None)
    assert json.loads((tmp_path / "out.json").read_text()) == [
        {"id": "two", "calls": [{"ok": True, "value": {"v": 4}}]}]


TESTS = '''import pytest
from strategies.momentum import target_weights
from strategies import momentum


@pytest.fixture
def weights():
    return target_weights({"A": 1.0}, 1)


def check(w, want):
    assert w == want


def test_direct():
    assert target_weights({"A": 1.0}, 1) == {"A": 0.5}


def test_via_name():
    w = momentum.target_weights({"A": 1.0}, 1)
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
    values = SourceValues(tree, ("strategies",), {"universe_from_s"})
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
    assert source_fixtures(tree, ("strategies",)) == {"weights"}


def test_red_violations_read_the_failing_line_and_conftest_fixtures(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import pytest\nfrom strategies.momentum import target_weights\n\n\n@pytest.fixture\n"
        "def chosen():\n    return target_weights({'A': 1.0}, 1)\n")
    (tmp_path / "tests" / "test_r.py").write_text(
        "def test_a(chosen):\n    assert chosen == {}\n\n\ndef test_b(universe):\n"
        "    assert universe == {}\n")
    suite = SuiteResult(outcomes={
        "tests/test_r.py::test_a": {"outcome": "failed", "assertion": True,
                                    "where": ["tests/test_r.py", 2]},
        "tests/test_r.py::test_b": {"outcome": "failed", "assertion": True,
                                    "where": ["tests/test_r.py", 6]},
        "tests/test_r.py::test_c": {"outcome": "failed", "assertion": True, "where": None},
        "tests/test_r.py::test_d": {"outcome": "error"}})
    ids = ["tests/test_r.py::test_a", "tests/test_r.py::test_b", "tests/test_r.py::test_c",
           "tests/test_r.py::test_d"]
    found = red_violations(suite, ids, tmp_path, ("strategies",))
    assert [v.message.split(":")[2] for v in found] == ["test_b", "test_c"]
    assert all(v.rule == "redgreen.not_about_source" for v in found)
