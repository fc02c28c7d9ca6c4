"""The gate's judging rules on recorded outcomes: pure functions over the plugin's results."""

from __future__ import annotations

from pathlib import Path

from guardrails.judging.checks import (
    new_test_ids,
    order_violations,
    outcome_violations,
    qualname,
    run_violations,
    unchanged_failures,
)
from guardrails.sandbox.runner import SuiteResult
from guardrails.verdict import Violation
from guardrails.workspace import GuardContract


def _suite(**outcomes: str) -> SuiteResult:
    ids = [f"tests/test_a.py::{name}" for name in outcomes]
    return SuiteResult(
        collected=ids,
        outcomes={
            nodeid: {"outcome": outcome}
            for nodeid, outcome in zip(ids, outcomes.values(), strict=True)
            if outcome != "missing"
        },
    )


def _rules(found: list[Violation]) -> list[str]:
    return [v.rule for v in found]


def test_skips_xfails_failures_and_errors_are_each_named() -> None:
    suite = _suite(
        test_ok="passed", test_skip="skipped", test_xf="xfail", test_bad="failed", test_err="error"
    )
    found = outcome_violations(suite, [], None)
    assert _rules(found) == ["tests.skipped", "tests.skipped", "tests.failed", "tests.failed"]
    assert found[0].path == "tests/test_a.py" and found[0].message.startswith(
        "tests/test_a.py::test_skip: skipped"
    )


def test_nothing_collected_and_fewer_tests_than_before() -> None:
    assert _rules(run_violations(SuiteResult(), 0)) == ["tests.none_collected"]
    assert _rules(run_violations(_suite(test_ok="passed"), 3)) == ["tests.fewer_than_before"]
    tampered = SuiteResult(
        collected=["t::a"], tamper=["builtins.sum was replaced"], collect_errors={"t.py": "boom"}
    )
    assert _rules(run_violations(tampered, 0)) == ["run.tamper", "tests.collection_error"]


def test_red_rules_apply_to_new_tests_only() -> None:
    suite = _suite(test_old="passed", test_new="failed", test_err="error")
    suite.outcomes["tests/test_a.py::test_new"]["assertion"] = True
    new = ["tests/test_a.py::test_new", "tests/test_a.py::test_err"]
    assert _rules(outcome_violations(suite, new, "red")) == ["redgreen.not_assertion"]
    assert _rules(outcome_violations(suite, new, "green")) == ["tests.failed", "tests.failed"]
    assert _rules(outcome_violations(_suite(test_a="passed"), [], "red")) == [
        "redgreen.no_new_tests"
    ]


def test_pre_existing_failures_are_not_blamed_on_the_patch() -> None:
    suite = _suite(test_old="failed", test_other="error", test_new="passed")
    new = ["tests/test_a.py::test_new"]
    assert unchanged_failures(suite, new) == [
        "tests/test_a.py::test_old",
        "tests/test_a.py::test_other",
    ]
    kept = frozenset({"tests/test_a.py::test_old"})
    found = outcome_violations(suite, new, "green", kept)
    assert [v.message.split(": ")[0] for v in found] == ["tests/test_a.py::test_other"]


def test_order_rules_compare_both_runs() -> None:
    forward = _suite(test_a="passed", test_b="passed")
    assert order_violations(forward, _suite(test_a="passed", test_b="passed")) == []
    assert _rules(order_violations(forward, _suite(test_a="passed"))) == ["tests.order_dependent"]
    flipped = order_violations(forward, _suite(test_a="passed", test_b="failed"))
    assert "passed in file order but failed in reverse order" in flipped[0].message
    broken = SuiteResult(problems=[Violation(rule="run.timeout", message="slow")])
    assert order_violations(forward, broken) == []


def test_new_tests_are_those_added_or_changed(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for root in (old, new):
        (root / "tests").mkdir(parents=True)
    (old / "tests" / "test_a.py").write_text(
        "def test_same():\n    assert 1\n\n\ndef test_edit():\n    assert 1\n"
    )
    (new / "tests" / "test_a.py").write_text(
        "def test_same():\n    assert 1\n\n\ndef test_edit():\n    assert 2\n\n\n"
        "class TestNew:\n    def test_m(self):\n        assert 3\n"
    )
    (new / "tests" / "test_b.py").write_text("def test_b(:\n")  # does not parse: nothing new
    contract = GuardContract(root=old, source=("strategies",), tests=("tests",))
    collected = [
        "tests/test_a.py::test_same",
        "tests/test_a.py::test_edit",
        "tests/test_a.py::TestNew::test_m[1]",
        "tests/test_b.py::test_b",
    ]
    ids = new_test_ids(
        contract, new, collected, ["tests/test_a.py", "tests/test_b.py", "strategies/x.py"]
    )
    assert ids == ["tests/test_a.py::test_edit", "tests/test_a.py::TestNew::test_m[1]"]
    assert qualname("tests/test_a.py::TestNew::test_m[1]") == "TestNew.test_m"


def test_every_phase_rechecks_all_of_t_for_hooks_and_capabilities(tmp_path: Path) -> None:
    from guardrails.judging.recheck import recheck_tests

    contract = GuardContract(root=tmp_path, source=("strategies",), tests=("tests",))
    (tmp_path / "tests" / "deep").mkdir(parents=True)
    (tmp_path / "tests" / "test_ok.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    assert recheck_tests(contract, tmp_path) == []
    # planted by an earlier patch, in a file no later patch touches
    (tmp_path / "tests" / "deep" / "conftest.py").write_text(
        "def pytest_collection_modifyitems(items):\n    items.clear()\n"
    )
    (tmp_path / "tests" / "deep" / "test_x.py").write_text(
        "from pydantic import ImportString\ndef test_b():\n    assert ImportString\n"
    )
    found = recheck_tests(contract, tmp_path)
    assert {(v.path, v.rule) for v in found} == {
        ("tests/deep/conftest.py", "tests.pytest_hook"),
        ("tests/deep/test_x.py", "sanitizer.module_escape"),
    }
    allowed = GuardContract(
        root=tmp_path,
        source=("strategies",),
        tests=("tests",),
        allow=frozenset({"tests.pytest_hook", "sanitizer.module_escape"}),
    )
    assert recheck_tests(allowed, tmp_path) == []
