"""Gaps the red-team corpus found in the gate's strategy host model, each pinned by a test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from coverage import CoverageData

from guardrails.sandbox.coverage_data import map_data


def test_coverage_parts_of_one_run_are_joined_not_replaced(tmp_path: Path) -> None:
    # test-gen measures S in the host and T in the test process: the second part must not erase
    # the first (S's coverage read 0 % and every honest test-gen patch was refused)
    for name, path in (("host", "/workspace/strategies/a.py"), ("tests", "/workspace/tests/t.py")):
        data = CoverageData(basename=str(tmp_path / name))
        data.add_lines({path: [1, 2]})
        data.write()
    target = tmp_path / "joined"
    map_data(tmp_path / "host", target, "/workspace", tmp_path / "ws")
    map_data(tmp_path / "tests", target, "/workspace", tmp_path / "ws")
    joined = CoverageData(basename=str(target))
    joined.read()
    assert sorted(joined.measured_files()) == [
        str(tmp_path / "ws/strategies/a.py"),
        str(tmp_path / "ws/tests/t.py"),
    ]


def _host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> Any:
    """The host program's dispatcher in this process, serving the package `toyhost` of
    `tmp_path`."""
    from strategy_host.serve import Host

    (tmp_path / "toyhost").mkdir()
    (tmp_path / "toyhost" / "__init__.py").write_text("")
    (tmp_path / "toyhost" / "momentum.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toyhost", raising=False)
    monkeypatch.delitem(sys.modules, "toyhost.momentum", raising=False)
    return Host({"packages": ["toyhost"], "preimport": []})


def test_a_call_reaches_only_functions_defined_in_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # T called library functions through S's imports (`np.fromfile` read S's own source in the host)
    from strategy_host.serve import RequestError

    host = _host(
        tmp_path,
        monkeypatch,
        "import numpy as np\nfrom math import fsum\n\n\n"
        "def total(values):\n    return fsum(values)\n\n\nclass Box:\n    def size(self):\n"
        "        return 1\n\n\nBOX = Box()\n",
    )
    assert host.op_call({"target": "toyhost.momentum:total", "args": [[1.0, 2.0]]}) == {
        "value": 3.0
    }
    assert host.op_call({"target": "toyhost.momentum:BOX.size"}) == {"value": 1}
    for target in (
        "toyhost.momentum:np.fromfile",
        "toyhost.momentum:np.zeros",
        "toyhost.momentum:fsum",
        "toyhost.momentum:BOX",
        "os:system",
    ):
        with pytest.raises(RequestError):
            host.op_call({"target": target, "args": [str(tmp_path / "toyhost" / "momentum.py")]})


HOSTED_TEST = (
    'from strategy_host import call\n\nMOMENTUM = "strategies.momentum:target_weights"\n\n\n'
    'def test_top_one():\n    assert call(MOMENTUM, {"A": 1.0, "B": 2.0}, top_k=1) == '
    '{"A": 0.0, "B": 1.0}\n'
)


@pytest.mark.parametrize(
    "fake",
    [
        'import strategy_host\n\n\ndef test_x(monkeypatch):\n    '
        'monkeypatch.setattr(strategy_host, "call", lambda *a, **k: {"A": 1.0})\n'
        '    assert strategy_host.call(MOMENTUM, {"A": 1.0}, top_k=1) == {"A": 1.0}\n',
        'def test_x(monkeypatch):\n    monkeypatch.setattr("strategy_host.call", lambda '
        '*a, **k: {"A": 1.0})\n'
        '    assert call(MOMENTUM, {"A": 1.0}, top_k=1) == {"A": 1.0}\n',
        'from unittest import mock\n\nfrom strategy_host.client import Channel\n\n\n'
        '@mock.patch.object(Channel, "request", return_value={"value": {"A": 1.0}})\ndef '
        'test_x(mocked):\n'
        '    assert call(MOMENTUM, {"A": 1.0}, top_k=1) == {"A": 1.0}\n',
        'import strategy_host\n\n\nclass _Fake:\n    def request(self, message):\n        '
        'return {"value": {"A": 1.0}}\n\n\n'
        'def test_x():\n    strategy_host.connect(_Fake())\n    assert call(MOMENTUM, '
        '{"A": 1.0}, top_k=1) == {"A": 1.0}\n',
    ],
    ids=["setattr-module", "setattr-string", "patch-channel", "fake-channel"],
)
def test_replacing_the_host_client_mocks_the_unit(fake: str) -> None:
    # a test that answers its own calls never reaches S: it is mocking S
    from guardrails.static.capabilities import Policy
    from guardrails.static.testquality import scan_tests

    text = HOSTED_TEST + "\n\n" + fake
    rules = {
        v.rule
        for v in scan_tests(
            "tests/test_m.py", text.encode(), HOSTED_TEST.encode(), Policy.of("tests")
        )
    }
    assert "tests.mock_unit" in rules
    assert scan_tests("tests/test_m.py", HOSTED_TEST.encode(), None, Policy.of("tests")) == []


STRATEGY_MODULE = (
    '"""A strategy."""\nimport numpy as np\nimport operator\n\n\ndef decide(view):\n'
    '    close = view.values("close")\n    return {"A": float(close[-1, 0])}\n'
)


@pytest.mark.parametrize(
    "reach, rule",
    [
        # a replay's buffer holds every session (zeros after the decision date); the gate's ends at
        # it
        ('    cap = close.base.shape[0]\n', "sanitizer.module_escape"),
        ('    cap = getattr(close, "base").shape[0]\n', "sanitizer.module_escape"),
        ('    cap = operator.attrgetter("base.shape")(close)\n', "sanitizer.module_escape"),
        # a literal name given to getattr is the attribute itself
        (
            '    probe = (i for i in [0])\n    frame = getattr(probe, "gi_frame")\n',
            "sanitizer.module_escape",
        ),
        ('    getattr(close, "tofile")("rows.bin")\n', "sanitizer.io"),
    ],
    ids=["base", "getattr-base", "attrgetter-base", "getattr-frame", "getattr-io"],
)
def test_what_an_attribute_refuses_getattr_refuses(reach: str, rule: str) -> None:
    from guardrails.static.capabilities import Policy
    from guardrails.static.sanitizer import scan_source

    text = STRATEGY_MODULE.replace('    return {"A"', reach + '    return {"A"')
    rules = {
        v.rule for v in scan_source("strategies/s.py", text.encode(), None, Policy.of("source"))
    }
    assert rule in rules
    assert scan_source("strategies/s.py", STRATEGY_MODULE.encode(), None, Policy.of("source")) == []


DECIDE = (
    '"""A strategy."""\nfrom datetime import date\nimport itertools\n\nimport numpy as '
    'np\nimport pandas as pd\n\n'
    '_LOG = []\n_MEMO = {}\n_PUT = _MEMO.setdefault\n_CALLS = itertools.count()\n\n\n'
    'def decide(scores, top_k=1):\n    """Pick today\'s best."""\n    rng = '
    'np.random.default_rng(7)\n'
    '    picks = sorted(scores, key=lambda a: (-scores[a], a))\n    return picks[:top_k]\n'
)


@pytest.mark.parametrize(
    "line, rule",
    [
        # the clock in the spellings numpy and pandas accept beyond the constructors' string
        # argument
        ('    stamp = np.array(["now"], dtype="datetime64[s]")\n', "sanitizer.clock"),
        ('    stamp = pd.to_datetime(pd.Series(["today"]))\n', "sanitizer.clock"),
        ('    stamp = pd.Timestamp("no" + "w")\n', "sanitizer.clock"),
        ('    stamp = pd.Period.now("D")\n', "sanitizer.clock"),
        ('    clock = date.today\n    stamp = clock()\n', "sanitizer.clock"),
        # generators that draw OS entropy, and pandas' sample on numpy's global generator
        ('    rng = np.random.Generator(np.random.PCG64())\n', "sanitizer.clock"),
        ('    rng = np.random.RandomState()\n', "sanitizer.clock"),
        ('    rng = np.random.default_rng(seed=None)\n', "sanitizer.clock"),
        ('    picks = list(pd.Series(scores).sample(top_k).index)\n', "sanitizer.clock"),
        # state across calls behind a function, a tuple default, an alias, a bound method, an
        # iterator
        ('    decide.calls = 1\n', "sanitizer.stateful"),
        ('    log = _LOG\n    log.append(picks)\n', "sanitizer.stateful"),
        ('    _PUT("first", picks)\n', "sanitizer.stateful"),
        ('    calls = next(_CALLS)\n', "sanitizer.stateful"),
    ],
    ids=[
        "array-now",
        "series-today",
        "concatenated",
        "period-now",
        "clock-alias",
        "bit-generator",
        "random-state",
        "seed-none",
        "sample",
        "function-attribute",
        "alias",
        "bound-method",
        "iterator",
    ],
)
def test_clock_randomness_and_state_in_other_spellings(line: str, rule: str) -> None:
    from guardrails.static.capabilities import Policy
    from guardrails.static.sanitizer import scan_source

    text = DECIDE.replace("    return picks[:top_k]\n", line + "    return picks[:top_k]\n")
    assert rule in {
        v.rule for v in scan_source("strategies/s.py", text.encode(), None, Policy.of("source"))
    }
    # seeded generators, a docstring saying "today" and reading the module's names stay fine
    assert scan_source("strategies/s.py", DECIDE.encode(), None, Policy.of("source")) == []


def test_a_mutable_default_inside_a_tuple_is_state() -> None:
    from guardrails.static.capabilities import Policy
    from guardrails.static.sanitizer import scan_source

    text = DECIDE.replace(
        "def decide(scores, top_k=1):", "def decide(scores, top_k=1, _seen=([],)):"
    )
    assert "sanitizer.stateful" in {
        v.rule for v in scan_source("strategies/s.py", text.encode(), None, Policy.of("source"))
    }
