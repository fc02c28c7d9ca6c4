"""The coverage gate's runner: the gate's plugin in-process, and real locked pytest + coverage runs."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path

import pytest

from guardrails.childrun import GatePlugin
from guardrails.rolock import HashOnlyLock, NamespaceLock, RoLock, RunResult
from guardrails.runner import (
    CoverageReader,
    GateDirs,
    SuiteRequest,
    SuiteResult,
    _consistency,
    clean_env,
    function_body_lines,
    run_suite,
    write_gate_config,
)
from guardrails.workspace import GateSetupError
from tests.guardrails.gate_helpers import MOMENTUM, make_workspace

pytest_plugins = ["pytester"]


def test_plugin_records_outcomes_by_node_id_in_reverse_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_outcomes="""
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

        def test_g_type_error():
            raise TypeError("bad call")
        """)
    plugin = GatePlugin("reverse", str(pytester.path))
    pytester.inline_run(plugins=[plugin])
    results = plugin.results(1)
    assert results["finished"] and results["exit_code"] == 1
    assert results["collected"][0].endswith("test_g_type_error")  # reversed
    outcomes = {k.split("::")[1]: v for k, v in results["outcomes"].items()}
    assert outcomes["test_a_passes"]["outcome"] == "passed"
    assert outcomes["test_b_fails"] == {**outcomes["test_b_fails"], "outcome": "failed",
                                        "assertion": True, "exc_type": "AssertionError"}
    assert outcomes["test_c_skips"]["outcome"] == "skipped"
    assert outcomes["test_d_xfails"]["outcome"] == "xfail"
    assert outcomes["test_e_errors"]["outcome"] == "error"
    assert "fixture broke" in outcomes["test_e_errors"]["message"]
    assert outcomes["test_f_raises_not"]["assertion"] is True  # DID NOT RAISE counts as red
    assert outcomes["test_g_type_error"]["assertion"] is False
    assert results["tamper"] == [] and results["collect_errors"] == {}


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
    pytester.makepyfile(test_tamper="""
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
        """)
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
    text = "X = 1\n\n\ndef f(a):\n    b = a\n    return b\n\n\nclass C:\n    async def g(self):\n        return 2\n"
    assert function_body_lines(text) == {5, 6, 11}


@pytest.fixture()
def dirs() -> GateDirs:
    created = GateDirs.create()
    yield created
    created.remove()
    assert not created.root.exists()


def _prepare(dirs: GateDirs, workspace: Path, measured: list[str]) -> None:
    import shutil

    shutil.copytree(workspace, dirs.ws)
    write_gate_config(dirs, [dirs.ws / tree for tree in measured])


def _request(dirs: GateDirs, **kwargs: object) -> SuiteRequest:
    return SuiteRequest(rootdir=dirs.ws, targets=[dirs.ws / "tests"], paths=[dirs.ws],
                        **kwargs)  # type: ignore[arg-type]


def test_gate_settings_replace_the_workspace_configuration(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "pytest.ini").write_text("[pytest]\naddopts = -k nothing_matches -p no:python\n")
    (ws / ".coveragerc").write_text("[run]\nomit = strategies/*\n")
    (ws / "conftest.py").write_text("raise SystemExit('the root conftest must not load')\n")
    (ws / "sitecustomize.py").write_text("raise SystemExit('never imported')\n")
    _prepare(dirs, ws, ["strategies"])
    suite = run_suite(HashOnlyLock(), dirs, _request(dirs, coverage=True, tag="t"),
                      timeout_s=120, memory_mb=2048)
    assert suite.problems == [] and suite.tamper == []
    assert len(suite.collected) == 5 and suite.failing() == []
    assert suite.collected[0] == "tests/test_momentum.py::test_top2_equal_weight"
    reader = CoverageReader(suite.data_file, dirs.cfg / "coverage.rc")  # type: ignore[arg-type]
    momentum = dirs.ws / MOMENTUM
    assert reader.branch_percent([momentum]) == 100.0
    assert reader.branch_percent([]) == 100.0
    assert reader.missing_lines(momentum) == set()
    body = {line for line, contexts in reader.contexts(momentum).items() if any(contexts)}
    assert reader.lines_run_by(momentum, {"test_ties_broken_alphabetically"}) <= body
    assert reader.lines_run_by(momentum, {"TestValidation.test_rejects_non_positive_top_k"})
    assert reader.lines_run_by(momentum, {"no_such_test"}) == set()
    assert reader.import_time_only(momentum, set(range(1, 30))) == set()


def test_reverse_order_and_a_selection(tmp_path: Path, dirs: GateDirs) -> None:
    _prepare(dirs, make_workspace(tmp_path), ["strategies"])
    suite = run_suite(HashOnlyLock(), dirs, _request(
        dirs, order="reverse", tag="r", select=(f"{dirs.ws}/tests/test_smoke.py",)),
        timeout_s=120, memory_mb=2048)
    assert suite.collected == ["tests/test_smoke.py::test_single_asset_gets_full_weight"]
    assert suite.data_file is None and suite.problems == []


def test_early_exit_leaves_no_results_and_is_rejected(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "test_exit.py").write_text("import os\n\n\ndef test_exit():\n    os._exit(0)\n")
    _prepare(dirs, ws, ["strategies"])
    suite = run_suite(HashOnlyLock(), dirs, _request(dirs, tag="x"), timeout_s=120,
                      memory_mb=2048)
    assert [p.rule for p in suite.problems] == ["run.incomplete"]
    assert "exit code 0" in suite.problems[0].message


def test_time_limit_kills_a_hanging_suite(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "test_hang.py").write_text("import time\n\n\ndef test_hang():\n    time.sleep(60)\n")
    _prepare(dirs, ws, ["strategies"])
    suite = run_suite(HashOnlyLock(), dirs, _request(dirs, tag="h"), timeout_s=3,
                      memory_mb=2048)
    assert [p.rule for p in suite.problems] == ["run.timeout"]


@pytest.mark.skipif(NamespaceLock.available() is not None, reason="needs the namespace lock")
def test_conftest_that_fails_to_import_is_a_pytest_error(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    (ws / "tests" / "conftest.py").write_text("open(__file__, 'a').write('# tampered')\n")
    _prepare(dirs, ws, ["strategies"])
    suite = run_suite(NamespaceLock(), dirs, _request(dirs, tag="c"), timeout_s=120,
                      memory_mb=2048)
    rules = [p.rule for p in suite.problems]
    assert "run.pytest_error" in rules and "run.no_results" in rules
    assert "Read-only file system" in " ".join(p.message for p in suite.problems)
    assert not (dirs.ws / "tests" / "conftest.py").read_text().endswith("# tampered")


class _BrokenLock(RoLock):
    backend = "broken"

    def run(self, *args: object, **kwargs: object) -> RunResult:
        return RunResult(97, "", "oomrl-gate-lock-failed: mount: permission denied", False)


def test_a_lock_that_cannot_be_set_up_is_an_infrastructure_error(tmp_path: Path,
                                                                 dirs: GateDirs) -> None:
    _prepare(dirs, make_workspace(tmp_path), ["strategies"])
    with pytest.raises(GateSetupError, match="could not be set up"):
        run_suite(_BrokenLock(), dirs, _request(dirs), timeout_s=5, memory_mb=512)


def _junit(path: Path, cases: str) -> Path:
    path.write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    return path


def test_results_are_cross_checked_against_junit_and_exit_status(tmp_path: Path) -> None:
    passed = SuiteResult(collected=["t::a", "t::b"],
                         outcomes={"t::a": {"outcome": "passed"}, "t::b": {"outcome": "passed"}})
    good = _junit(tmp_path / "good.xml", "<testcase name='a'/><testcase name='b'/>")
    assert _consistency(passed, 0, good, "run") == []
    assert [v.rule for v in _consistency(passed, 1, good, "run")] == ["run.results_mismatch"]
    forged = _junit(tmp_path / "forged.xml", "<testcase name='a'><failure/></testcase>"
                                             "<testcase name='b'/>")
    assert [v.rule for v in _consistency(passed, 0, forged, "run")] == ["run.results_mismatch"]
    short = _junit(tmp_path / "short.xml", "<testcase name='a'/>")
    assert [v.rule for v in _consistency(passed, 0, short, "run")] == ["run.results_mismatch"]
    missing = SuiteResult(collected=["t::a", "t::b"], outcomes={"t::a": {"outcome": "passed"}})
    assert [v.rule for v in _consistency(missing, 1, good, "run")] == ["run.incomplete"]
    assert missing.outcome("t::b") == "missing" and missing.failing() == ["t::b"]
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites")
    assert [v.rule for v in _consistency(passed, 0, broken, "run")] == ["run.no_results"]


def test_clean_env_is_minimal_and_disables_plugin_autoload(dirs: GateDirs) -> None:
    env = clean_env(dirs)
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1" and env["PYTHONNOUSERSITE"] == "1"
    assert env["HOME"].startswith(str(dirs.tmp)) and (dirs.tmp / "home").is_dir()
    assert not any(key.startswith(("COV", "OOMRL", "PREFECT")) for key in env)


def test_a_missing_test_folder_fails_loudly(tmp_path: Path, dirs: GateDirs) -> None:
    ws = make_workspace(tmp_path)
    _prepare(dirs, ws, ["strategies"])
    request = SuiteRequest(rootdir=dirs.ws, targets=[dirs.ws / "no_tests"], paths=[dirs.ws],
                           tag="m")
    suite = run_suite(HashOnlyLock(), dirs, request, timeout_s=120, memory_mb=2048)
    assert suite.collected == []
    assert "run.pytest_error" in [p.rule for p in suite.problems]
    assert "no_tests" in " ".join(p.message for p in suite.problems)


def test_child_launcher_writes_results_only_after_pytest_returns(tmp_path: Path) -> None:
    import json

    from guardrails import childrun

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_one.py").write_text("def test_one():\n    assert 2 * 2 == 4\n")
    results = tmp_path / "results.json"
    spec = {"paths": [str(tmp_path)], "workspace": str(tmp_path), "order": "forward",
            "results": str(results), "coverage": None,
            "args": ["-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                     str(tmp_path / "tests")]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    path_before = list(sys.path)
    try:
        assert childrun.main(str(tmp_path / "spec.json")) == 0
    finally:
        sys.path[:] = path_before
    recorded = json.loads(results.read_text())
    assert recorded["finished"] and recorded["collected"] == ["tests/test_one.py::test_one"]
    assert recorded["outcomes"]["tests/test_one.py::test_one"]["outcome"] == "passed"
