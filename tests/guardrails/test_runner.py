"""Locked runs: the gate's plugin in-process, and real sandboxed pytest + coverage runs, each with S
in a strategy host of its own (its coverage measured there, joined to the test process's)."""

from __future__ import annotations

import builtins
import json
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardrails.child.childrun import GatePlugin
from guardrails.sandbox.bwrap import BwrapLock
from guardrails.sandbox.coverage_data import CoverageReader, function_body_lines
from guardrails.sandbox.locks import HashOnlyLock, RoLock
from guardrails.sandbox.runner import (
    GateDirs,
    SuiteRequest,
    SuiteResult,
    consistency,
    make_readable,
    run_suite,
)
from tests.guardrails.gate_helpers import MOMENTUM, make_workspace, own_host_state, plant

pytest_plugins = ["pytester"]
LOCK: RoLock = BwrapLock() if BwrapLock.available() is None else HashOnlyLock()


def test_plugin_records_outcomes_by_node_id_in_reverse_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_outcomes="""
        import pytest

        def test_a_passes():
            assert 1 + 1 == 2

        def test_b_fails():
            assert [1] == [2]

        def test_c_skips():
            pytest.skip("later")

        @pytest.mark.xfail(strict=False)
        def test_d_xfails():
            assert False

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture broke")

        def test_e_errors(broken):
            pass

        def test_f_raises_not():
            with pytest.raises(ValueError):
                pass

        def _helper(x):
            raise TypeError("bad call")

        def test_g_type_error():
            _helper(1)
        """
    )
    root = str(pytester.path)
    plugin = GatePlugin("reverse", root, tests_root=root, rootdir=root)
    pytester.inline_run(plugins=[plugin])
    results = plugin.results(1)
    assert results["finished"] and results["exit_code"] == 1
    assert results["collected"][0].endswith("test_g_type_error")  # reversed
    outcomes = {k.split("::")[1]: v for k, v in results["outcomes"].items()}
    assert outcomes["test_a_passes"]["outcome"] == "passed"
    assert outcomes["test_b_fails"] == {
        **outcomes["test_b_fails"],
        "outcome": "failed",
        "assertion": True,
        "exc_type": "AssertionError",
        "where": ["test_outcomes.py", 7],
    }
    assert outcomes["test_c_skips"]["outcome"] == "skipped"
    assert outcomes["test_d_xfails"]["outcome"] == "xfail"
    assert outcomes["test_e_errors"]["outcome"] == "error"
    assert "fixture broke" in outcomes["test_e_errors"]["message"]
    assert outcomes["test_f_raises_not"]["assertion"] is True  # DID NOT RAISE counts as red
    assert outcomes["test_g_type_error"]["assertion"] is False
    assert outcomes["test_g_type_error"]["where"] == ["test_outcomes.py", 28]  # in the helper
    assert results["tamper"] == [] and results["collect_errors"] == {}


@pytest.mark.slow
def test_plugin_records_collection_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken_module="import no_such_module_oomrl\n")
    plugin = GatePlugin("forward", str(pytester.path))
    pytester.inline_run(plugins=[plugin])
    errors = plugin.results(2)["collect_errors"]
    assert list(errors) == ["test_broken_module.py"]
    assert "no_such_module_oomrl" in errors["test_broken_module.py"]


def test_plugin_notices_tampering(pytester: pytest.Pytester) -> None:
    from _pytest.reports import TestReport

    factory = TestReport.__dict__["from_item_and_call"]
    real_sum = builtins.sum
    meta_path = list(sys.meta_path)
    pytester.makepyfile(
        test_tamper="""
        import builtins
        import sys
        from _pytest.reports import TestReport

        class Finder:
            def find_spec(self, name, path, target=None):
                return None

        def test_tamper():
            builtins.sum = lambda *args: 0
            sys.meta_path.insert(0, Finder())
            sys.meta_path.append(object())
            TestReport.from_item_and_call = classmethod(lambda cls, item, call: None)
            assert True
        """
    )
    plugin = GatePlugin("forward", str(pytester.path))
    try:
        pytester.inline_run(plugins=[plugin])
    finally:
        TestReport.from_item_and_call = factory
        builtins.sum = real_sum
        sys.meta_path[:] = meta_path
    tamper = " | ".join(plugin.results(0)["tamper"])
    assert "from_item_and_call was replaced" in tamper
    assert "builtins.sum was replaced" in tamper
    assert "import hook Finder installed from" in tamper
    assert "object" not in tamper  # foreign hooks from outside the workspace are not blamed


def test_function_body_lines() -> None:
    text = (
        "X = 1\n\n\ndef f(a):\n    b = a\n    return b\n\n\nclass C:\n    async def g(self):\n "
        "       return 2\n"
    )
    assert function_body_lines(text) == {5, 6, 11}


@pytest.fixture()
def dirs() -> Iterator[GateDirs]:
    created = GateDirs.create()
    yield created
    created.remove()
    assert not created.root.exists()


def _prepare(dirs: GateDirs, workspace: Path) -> None:
    shutil.copytree(workspace, dirs.ws)
    make_readable(dirs.ws)


def _request(dirs: GateDirs, **kwargs: object) -> SuiteRequest:
    return SuiteRequest(workspace=dirs.ws, tests=("tests",), **kwargs)  # type: ignore[arg-type]


def test_gate_settings_replace_the_workspace_configuration(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "pytest.ini").write_text("[pytest]\naddopts = -k nothing_matches -p no:python\n")
    (ws / ".coveragerc").write_text("[run]\nomit = strategies/*\n")
    (ws / "conftest.py").write_text("raise SystemExit('the root conftest must not load')\n")
    (ws / "sitecustomize.py").write_text("raise SystemExit('never imported')\n")
    _prepare(dirs, ws)
    suite = run_suite(
        LOCK, dirs, _request(dirs, coverage=("strategies",), tag="t"), timeout_s=120, memory_mb=2048
    )
    assert suite.problems == [] and suite.tamper == []
    assert len(suite.collected) == 5 and suite.failing() == []
    assert suite.collected[0] == "tests/test_momentum.py::test_top2_equal_weight"
    reader = CoverageReader(suite.data_file, dirs.cfg / "coverage.rc")  # type: ignore[arg-type]
    momentum = dirs.ws / MOMENTUM
    assert reader.branch_percent([momentum]) == 100.0 and reader.branch_percent([]) == 100.0
    assert reader.missing_lines(momentum) == set()
    ties = "tests/test_momentum.py::test_ties_broken_alphabetically"
    body = function_body_lines(momentum.read_text())
    run = reader.lines_run_by(momentum, {ties})  # the host records each call under its test's id
    assert run <= body and {15, 17, 20} <= run and 16 not in run  # no ValueError for top_k=1
    assert reader.lines_run_by(momentum, {"no_such_test"}) == set()
    assert reader.import_time_only(momentum, set(range(1, 30))) == set()
    assert not list((dirs.root / "runs").iterdir())  # the run's folder went with it


def test_module_bodies_run_only_at_import_time_whatever_the_tests_do(
    tmp_path: Path, dirs: GateDirs
) -> None:
    ws = make_workspace(tmp_path)
    (ws / "strategies" / "warm.py").write_text(
        "def test_helper():\n    return 1\n\n\nVALUE = test_helper()\n\n\ndef value():\n   "
        " return VALUE\n"
    )
    (ws / "tests" / "test_warm.py").write_text(
        "from strategy_host import call\n\n\ndef test_lazy():\n    assert "
        "call('strategies.warm:value') == 1\n"
    )
    _prepare(dirs, ws)
    suite = run_suite(
        LOCK, dirs, _request(dirs, coverage=("strategies",), tag="w"), timeout_s=120, memory_mb=2048
    )
    reader = CoverageReader(suite.data_file, dirs.cfg / "coverage.rc")  # type: ignore[arg-type]
    warm = dirs.ws / "strategies" / "warm.py"
    # a function named like a test, run by the host's imports before any test: still import time
    assert reader.import_time_only(warm, {2, 9}) == {2}
    assert reader.lines_run_by(warm, {"tests/test_warm.py::test_lazy"}) == {9}


def test_s_and_t_coverage_of_one_run_are_joined(tmp_path: Path, dirs: GateDirs) -> None:
    # test-gen measures S (in the host) and T (in the test process) in the same run
    _prepare(dirs, make_workspace(tmp_path))
    suite = run_suite(
        LOCK,
        dirs,
        _request(dirs, coverage=("strategies", "tests"), tag="j"),
        timeout_s=120,
        memory_mb=2048,
    )
    reader = CoverageReader(suite.data_file, dirs.cfg / "coverage.rc")  # type: ignore[arg-type]
    assert reader.missing_lines(dirs.ws / MOMENTUM) == set()
    assert reader.missing_lines(dirs.ws / "tests" / "test_smoke.py") == set()
    assert reader.lines_run_by(
        dirs.ws / "tests" / "test_smoke.py",
        {"tests/test_smoke.py::test_single_asset_gets_full_weight"},
    ) == {5}


@pytest.mark.skipif(not LOCK.os_level, reason="needs the bubblewrap sandbox")
def test_s_is_not_in_the_test_process(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "test_reach.py").write_text(
        "import importlib.util\n\n\ndef test_s_is_absent():\n"
        "    assert importlib.util.find_spec('strategies') is None\n"
    )
    _prepare(dirs, ws)
    suite = run_suite(LOCK, dirs, _request(dirs, tag="a"), timeout_s=120, memory_mb=2048)
    assert suite.problems == [] and suite.failing() == [] and len(suite.collected) == 6


def test_a_host_that_cannot_start_fails_the_run(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "strategies" / "exit.py").write_text("raise SystemExit(3)\n")  # at import, in the host
    _prepare(dirs, ws)
    suite = run_suite(LOCK, dirs, _request(dirs, tag="s"), timeout_s=120, memory_mb=2048)
    assert [p.rule for p in suite.problems] == ["run.host_failed"]
    assert (
        "did not start" in suite.problems[0].message and "exit code 3" in suite.problems[0].message
    )
    assert suite.failing() == suite.collected != []  # every call into S failed


@pytest.mark.slow
def test_reverse_order_and_held_out_tests(tmp_path: Path, dirs: GateDirs) -> None:
    _prepare(dirs, make_workspace(tmp_path))
    held = tmp_path / "held"
    held.mkdir()
    (held / "test_held.py").write_text(
        "from strategy_host import call\n\n\ndef test_h():\n"
        "    assert call('strategies.momentum:target_weights', {'A': 1.0}, 1) == {'A': 1.0}\n"
    )
    make_readable(held)
    suite = run_suite(
        LOCK, dirs, _request(dirs, order="reverse", tag="r"), timeout_s=120, memory_mb=2048
    )
    assert suite.collected[-1] == "tests/test_momentum.py::test_top2_equal_weight"
    assert suite.data_file is None and suite.problems == []
    held_out = run_suite(
        LOCK,
        dirs,
        SuiteRequest(workspace=dirs.ws, tests=(), tag="h", heldout=held),
        timeout_s=120,
        memory_mb=2048,
    )
    assert held_out.collected == ["test_held.py::test_h"] and held_out.failing() == []


# This test and the next are alike in shape (a workspace, one test file, one run): each states
# one way a child run ends, and reads best whole.
def test_early_exit_leaves_no_results_and_is_rejected(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "test_exit.py").write_text("import os\n\n\ndef test_exit():\n    os._exit(0)\n")
    _prepare(dirs, ws)
    suite = run_suite(LOCK, dirs, _request(dirs, tag="x"), timeout_s=120, memory_mb=2048)
    assert [p.rule for p in suite.problems] == ["run.incomplete"]
    assert "exit code 0" in suite.problems[0].message


@pytest.mark.slow
def test_time_limit_kills_a_hanging_suite(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "test_hang.py").write_text(
        "import time\n\n\ndef test_hang():\n    time.sleep(60)\n"
    )
    _prepare(dirs, ws)
    suite = run_suite(LOCK, dirs, _request(dirs, tag="h"), timeout_s=3, memory_mb=2048)
    assert [p.rule for p in suite.problems] == ["run.timeout"]


@pytest.mark.skipif(not LOCK.os_level, reason="needs the bubblewrap sandbox")
def test_a_conftest_writing_the_workspace_is_a_pytest_error(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "conftest.py").write_text("open(__file__, 'a').write('# tampered')\n")
    _prepare(dirs, ws)
    suite = run_suite(LOCK, dirs, _request(dirs, tag="c"), timeout_s=120, memory_mb=2048)
    rules = [p.rule for p in suite.problems]
    assert "run.pytest_error" in rules and "run.no_results" in rules
    messages = " ".join(p.message for p in suite.problems)
    assert "Permission denied" in messages or "Read-only file system" in messages
    assert not (dirs.ws / "tests" / "conftest.py").read_text().endswith("# tampered")


def _junit(path: Path, cases: str) -> Path:
    path.write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    return path


def test_results_are_cross_checked_against_junit_and_exit_status(tmp_path: Path) -> None:
    passed = SuiteResult(
        collected=["t::a", "t::b"],
        outcomes={"t::a": {"outcome": "passed"}, "t::b": {"outcome": "passed"}},
    )
    good = _junit(tmp_path / "good.xml", "<testcase name='a'/><testcase name='b'/>")
    assert consistency(passed, 0, good, "run") == []
    assert [v.rule for v in consistency(passed, 1, good, "run")] == ["run.results_mismatch"]
    forged = _junit(
        tmp_path / "forged.xml", "<testcase name='a'><failure/></testcase><testcase name='b'/>"
    )
    assert [v.rule for v in consistency(passed, 0, forged, "run")] == ["run.results_mismatch"]
    short = _junit(tmp_path / "short.xml", "<testcase name='a'/>")
    assert [v.rule for v in consistency(passed, 0, short, "run")] == ["run.results_mismatch"]
    missing = SuiteResult(collected=["t::a", "t::b"], outcomes={"t::a": {"outcome": "passed"}})
    assert [v.rule for v in consistency(missing, 1, good, "run")] == ["run.incomplete"]
    assert missing.outcome("t::b") == "missing" and missing.failing() == ["t::b"]
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites")
    assert [v.rule for v in consistency(passed, 0, broken, "run")] == ["run.no_results"]


def test_a_missing_test_folder_fails_loudly(tmp_path: Path, dirs: GateDirs) -> None:
    _prepare(dirs, make_workspace(tmp_path))
    request = SuiteRequest(workspace=dirs.ws, tests=("no_tests",), tag="m")
    suite = run_suite(LOCK, dirs, request, timeout_s=120, memory_mb=2048)
    assert suite.collected == []
    assert "run.pytest_error" in [p.rule for p in suite.problems]
    assert "no_tests" in " ".join(p.message for p in suite.problems)


@pytest.mark.slow
def test_child_launcher_writes_results_only_after_pytest_returns(tmp_path: Path) -> None:
    from guardrails.child import childrun

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_one.py").write_text("def test_one():\n    assert 2 * 2 == 4\n")
    results = tmp_path / "results.json"
    spec = {
        "paths": [str(tmp_path)],
        "workspace": str(tmp_path),
        "order": "forward",
        "results": str(results),
        "coverage": None,
        "args": [
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "tests"),
        ],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    path_before = list(sys.path)
    try:
        assert childrun.main(str(tmp_path / "spec.json")) == 0
    finally:
        sys.path[:] = path_before
    recorded = json.loads(results.read_text())
    assert recorded["finished"] and recorded["collected"] == ["tests/test_one.py::test_one"]
    assert recorded["outcomes"]["tests/test_one.py::test_one"]["outcome"] == "passed"


@pytest.mark.slow
def test_child_launcher_connects_the_tests_to_the_host_it_is_handed(tmp_path: Path) -> None:
    from coverage import CoverageData

    from guardrails.child import childrun
    from guardrails.sandbox.strategyhost import HostSpec, relay, start_host

    ws = plant(
        tmp_path / "ws",
        {
            "strategies/__init__.py": "",
            "strategies/m.py": "def one():\n    return 1\n",
            "tests/test_handed.py": "from strategy_host import call\n\n\ndef test_one():\n"
            "    assert call('strategies.m:one') == 1\n",
        },
    )
    spec = {
        "paths": [str(ws)],
        "workspace": str(ws),
        "order": "forward",
        "coverage": None,
        "results": str(tmp_path / "results.json"),
        "args": ["-p", "no:cacheprovider", "-q", "--rootdir", str(ws), str(ws / "tests")],
    }
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    path_before = list(sys.path)
    with start_host(LOCK, HostSpec(ws, coverage=True)) as host, own_host_state():
        pump = relay(host, ours)
        (tmp_path / "spec.json").write_text(json.dumps({**spec, "host_fd": theirs.fileno()}))
        try:
            assert childrun.main(str(tmp_path / "spec.json")) == 0
        finally:
            sys.path[:] = path_before
            theirs.close()
        pump.join(60)
        (tmp_path / "host-coverage").write_bytes(bytes(host.finish()["coverage"]))
    data = CoverageData(basename=str(tmp_path / "host-coverage"))
    data.read()
    contexts = data.contexts_by_lineno(f"{host.workspace_inside}/strategies/m.py")
    assert contexts[2] == ["tests/test_handed.py::test_one"]  # the host recorded the running test
    assert contexts[1] == [""]  # the def ran at import, before any test


def test_a_run_that_fills_its_results_folder_is_rejected_by_name(
    tmp_path: Path, dirs: GateDirs
) -> None:
    from guardrails.sandbox.locks import MIB, WRITABLE_BYTES

    ws = make_workspace(tmp_path)
    (ws / "tests" / "test_fill.py").write_text(  # written as a test process can: 1 MiB at a time
        f"def test_fill():\n    for i in range({WRITABLE_BYTES // MIB + 8}):\n"
        f"        with open(f'/results/f{{i}}', 'wb') as h:\n            h.write(b'x' * {MIB})\n"
    )
    _prepare(dirs, ws)
    suite = run_suite(LOCK, dirs, _request(dirs, tag="x"), timeout_s=120, memory_mb=2048)
    assert [p.rule for p in suite.problems] == ["run.results_too_large"]
