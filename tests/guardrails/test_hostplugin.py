"""guardrails.sandbox.hostplugin: outside the gate, a workspace's tests reach S through one jailed
host too.

A toy workspace's tests run in a pytest session of their own with the plugin: in this process (the
lazily started host, its end with the session), and in a child process under pytest-cov, whose
report then holds S's lines as measured in the host.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import strategy_host
from guardrails.sandbox import hostplugin
from guardrails.sandbox.bwrap import BwrapLock
from tests.guardrails.gate_helpers import own_host_state, plant

pytest_plugins = ["pytester"]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BwrapLock.available() is not None, reason="needs bubblewrap"),
]
SOURCE = (
    '"""Toy S."""\n\n\ndef double(x):\n    if x < 0:\n        raise ValueError("negative")\n'
    '    return 2 * x\n\n\ndef unused():\n    return 1\n'
)
TESTS = (
    "import pytest\n\nfrom strategy_host import call\n\n\ndef test_double():\n"
    "    assert call('strategies.toy:double', 21) == 42\n\n\ndef test_negative():\n"
    "    with pytest.raises(ValueError):\n        call('strategies.toy:double', -1)\n"
)


@pytest.fixture()
def workspace(pytester: pytest.Pytester) -> Path:
    return plant(
        pytester.path,
        {
            "strategies/__init__.py": "",
            "strategies/toy.py": SOURCE,
            "tests/test_toy.py": TESTS,
            "pyproject.toml": '[tool.oomrl.guard]\nsource = ["strategies"]\ntests = '
            '["tests"]\nmemory_limit_mb = 2048\n',
        },
    )


@pytest.fixture()
def own_session_state() -> Iterator[None]:
    with own_host_state():
        yield


def test_the_tests_call_s_in_a_host_started_when_first_needed(
    workspace: Path, pytester: pytest.Pytester, own_session_state: None
) -> None:
    started: list[object] = []

    class Watch:
        def pytest_runtest_teardown(self) -> None:
            started[:] = [host for host, _ in hostplugin._HOSTS]

    result = pytester.inline_run(
        "-p",
        "guardrails.sandbox.hostplugin",
        "--strategy-lock",
        "bwrap",
        "--strategy-workspace",
        str(workspace),
        "tests",
        plugins=[Watch()],
    )
    result.assertoutcome(passed=2)
    assert len(started) == 1  # one host for the whole session
    assert started[0].closed  # type: ignore[attr-defined]  # finished with the session
    assert hostplugin._HOSTS == [] and strategy_host._STATE["channel"] is None


def test_without_a_host_a_call_says_how_to_get_one(own_session_state: None) -> None:
    strategy_host.connect(None)
    strategy_host.connect_lazily(None)
    with pytest.raises(strategy_host.HostError, match="no strategy host is connected"):
        strategy_host.call("strategies.toy:double", 1)


def test_pytest_cov_reports_the_lines_s_ran_in_its_host(
    workspace: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest_subprocess(
        "-p",
        "guardrails.sandbox.hostplugin",
        "--strategy-lock",
        "bwrap",
        "--cov=strategies",
        "--cov-branch",
        "--cov-report=term-missing",
        "-p",
        "no:cacheprovider",
        "tests",
    )
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines([r"strategies/toy\.py\s+6\s+1\s+2\s+0\s+88%\s+11"])
    assert not list(workspace.glob(".coverage.strategyhost*"))  # the host's part was combined
    with sqlite3.connect(workspace / ".coverage") as data:
        files = [row[0] for row in data.execute("select path from file")]
    assert str(workspace / "strategies" / "toy.py") in files  # mapped from /workspace to here
    assert not any(path.startswith("/workspace") for path in files)
