"""The gate's judging beyond the visible suite: behaviour as production calls S (a fresh host, the
gate as the caller), red tests about S, pre-existing failures, mutants, and honest layouts (new
folders, data fixtures). Every added test reaches S through strategy_host."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardrails.errors import GateSetupError
from guardrails.gate import run_gate
from guardrails.judging.behaviour_check import behaviour_violations, load_inputs, same
from guardrails.judging.mutant_check import killed
from guardrails.sandbox.bwrap import BwrapLock
from guardrails.sandbox.locks import HashOnlyLock, RoLock, make_readable
from guardrails.sandbox.runner import GateDirs, SuiteRequest, SuiteResult, run_suite
from guardrails.workspace import BehaviourContract
from tests.guardrails.gate_helpers import (
    CORPUS,
    MOMENTUM,
    created_workspaces_untouched,
    diff_for,
    fixed_momentum,
    make_workspace,
    unchanged,
)

LOCK: RoLock = BwrapLock() if BwrapLock.available() is None else HashOnlyLock()
TARGET = "strategies.momentum:target_weights"  # how a test calls S (through strategy_host)
CASES = {
    "cases": [
        {
            "id": "fresh-top-two",
            "kwargs": {"scores": {"W": 0.1, "X": 0.9, "Y": 0.5, "Z": 0.7}, "top_k": 2},
            "expect": {"W": 0.0, "X": 0.5, "Y": 0.0, "Z": 0.5},
        },
        {"id": "ties", "kwargs": {"scores": {"Q": 2.0, "P": 2.0, "R": 1.0}, "top_k": 2}},
        {"id": "rejects", "kwargs": {"scores": {"M": 1.0}, "top_k": -1}},
    ]
}


@pytest.fixture(autouse=True)
def _workspaces_untouched() -> Iterator[None]:
    with created_workspaces_untouched(), unchanged(CORPUS):
        yield


def behaviour_workspace(tmp_path: Path, base: str = "buggy") -> tuple[Path, Path]:
    ws = make_workspace(tmp_path, base)  # its contract has the behaviour table (entry momentum)
    held = tmp_path / "held"
    held.mkdir()
    (held / "behaviour.json").write_text(json.dumps(CASES))
    return ws, held


def patched(body: str) -> str:
    """The honest fix with `body` inserted at the top of target_weights."""
    text = fixed_momentum()
    return text.replace("    if top_k < 1:", body + "    if top_k < 1:", 1)


@pytest.mark.slow
def test_an_honest_fix_passes_the_behaviour_check(tmp_path: Path) -> None:
    ws, held = behaviour_workspace(tmp_path)
    with unchanged(ws, held):
        verdict = run_gate(
            ws, "code-patch", diff_for(ws, {MOMENTUM: fixed_momentum()}), holdout=held
        )
    assert verdict.accepted, verdict.violations


@pytest.mark.slow
def test_code_that_would_behave_otherwise_under_pytest_behaves_alike_everywhere(
    tmp_path: Path,
) -> None:
    ws, held = behaviour_workspace(tmp_path)
    # pytest attaches handlers to the root logger: honest only under pytest. S never runs under
    # pytest now (it runs in its host in every test run, as in production), so the visible tests
    # see the same cheat the behaviour cases do (one line, so coverage cannot tell)
    cheat = fixed_momentum().replace(
        "    return {a: (weight if a in chosen else 0.0) for a in scores}",
        "    weight *= 1.0 if logging.getLogger().hasHandlers() else 2.0\n"
        "    return {a: (weight if a in chosen else 0.0) for a in scores}",
    )
    cheat = cheat.replace("from typing import", "import logging\nfrom typing import", 1)
    verdict = run_gate(ws, "code-patch", diff_for(ws, {MOMENTUM: cheat}), holdout=held)
    rules = {v.rule for v in verdict.violations}
    assert "tests.failed" in rules and "behaviour.differs_under_pytest" not in rules, (
        verdict.violations
    )
    assert verdict.tests.failed > 0


@pytest.mark.slow
def test_expected_values_and_properties_are_checked_by_name_only(tmp_path: Path) -> None:
    ws, held = behaviour_workspace(tmp_path)
    # right on the visible tests' inputs (at most three assets), wrong on larger ones
    cheat = patched("    top_k = top_k if len(scores) < 4 else len(scores) * 2\n")
    verdict = run_gate(ws, "code-patch", diff_for(ws, {MOMENTUM: cheat}), holdout=held)
    messages = [v.message for v in verdict.violations]
    assert messages == ["held-out behaviour case fresh-top-two did not return the expected value"]
    assert "0.5" not in verdict.to_json()  # the expected values are never shown


def test_behaviour_inputs_need_a_contract(tmp_path: Path) -> None:
    held = tmp_path / "held"
    held.mkdir()
    assert load_inputs(None, None) is None and load_inputs(None, held) is None
    (held / "behaviour.json").write_text("{}")
    with pytest.raises(GateSetupError, match="no \\[tool.oomrl.guard.behaviour\\] table"):
        load_inputs(None, held)
    contract = BehaviourContract("call", "strategies.m:f")
    with pytest.raises(GateSetupError, match="non-empty 'cases' list"):
        load_inputs(contract, held)


def test_behaviour_comparison_rules() -> None:
    inputs = {
        "cases": [
            {"id": "a", "args": [{"X": 1.0}], "expect": {"X": 1.0}},
            {"id": "b", "rebalance": [["2024-01-02", None]]},
        ],
        "properties": ["weights", "known_symbols", "deterministic"],
    }
    good = [
        {"id": "a", "calls": [{"ok": True, "value": {"X": 1.0}}] * 2},
        {"id": "b", "calls": [{"ok": True, "value": [True]}] * 2},
    ]
    assert behaviour_violations(inputs, good) == []
    assert [v.rule for v in behaviour_violations(inputs, None)] == ["behaviour.incomplete"]
    drifting = [
        {"id": "a", "calls": [{"ok": True, "value": {"X": 1.0}}, {"ok": True, "value": {"Y": 2.0}}]}
    ]
    rules = [v.rule for v in behaviour_violations(inputs, drifting)]
    assert rules == ["behaviour.property", "behaviour.incomplete"]
    wrong = [{"id": "a", "calls": [{"ok": False, "error": "KeyError"}]}, good[1]]
    assert [v.rule for v in behaviour_violations(inputs, wrong)] == ["behaviour.unexpected"]
    unknown = [{"id": "a", "calls": [{"ok": True, "value": {"Z": 1.5}}]}, good[1]]
    messages = [v.message for v in behaviour_violations(inputs, unknown)]
    assert any("known_symbols" in m for m in messages) and any("weights" in m for m in messages)
    assert same(1, 1.0) and not same(True, 1) and not same([1], [1, 2]) and same("a", "a")


@pytest.mark.slow
def test_red_tests_must_assert_on_values_the_source_returns(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    tests = (ws / "tests" / "test_smoke.py").read_text() + f"\n\nMOMENTUM = {TARGET!r}\n"
    new = tests + (
        "\n\ndef test_mandate(universe):\n    call(MOMENTUM, universe, top_k=1)\n"
        "    assert universe['AAA'] == 4.0\n"
    )
    verdict = run_gate(ws, "test-gen", diff_for(ws, {"tests/test_smoke.py": new}), expect="red")
    assert [v.rule for v in verdict.violations] == ["redgreen.not_about_source"]
    honest = tests + (
        "\n\ndef test_mandate(universe):\n    weights = call(MOMENTUM, universe, top_k=1)\n"
        "    assert weights['AAA'] == 0.5\n"
    )
    verdict = run_gate(ws, "test-gen", diff_for(ws, {"tests/test_smoke.py": honest}), expect="red")
    assert verdict.accepted, verdict.violations


@pytest.mark.slow
def test_failures_from_before_the_patch_are_pre_existing(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, "buggy")  # its own tests already fail on the buggy source
    tests = (ws / "tests" / "test_smoke.py").read_text()
    new = tests + (
        "\n\ndef test_negative_top_k_rejected():\n    with pytest.raises(ValueError):\n"
        f"        call({TARGET!r}, {{'A': 1.0}}, top_k=-1)\n"
    )
    verdict = run_gate(
        ws,
        "test-gen",
        diff_for(ws, {"tests/test_smoke.py": "import pytest\n\n" + new}),
        expect="red",
    )
    assert verdict.accepted, verdict.violations
    assert any(
        "pre-existing failure" in note and "test_ties_broken_alphabetically" in note
        for note in verdict.notes
    )
    assert "notes" not in json.loads(verdict.to_json())  # the verdict's JSON shape is fixed


def test_a_mutant_is_killed_by_an_assertion_or_by_s_raising_in_a_new_test_that_passed_before() -> (
    None
):
    original = SuiteResult(
        collected=["t::new", "t::old"],
        outcomes={"t::new": {"outcome": "passed"}, "t::old": {"outcome": "passed"}},
    )
    by_old = SuiteResult(
        outcomes={
            "t::new": {"outcome": "passed"},
            "t::old": {"outcome": "failed", "assertion": True},
        }
    )
    by_error = SuiteResult(
        outcomes={"t::new": {"outcome": "failed", "assertion": False, "source_raised": False}}
    )
    by_new = SuiteResult(outcomes={"t::new": {"outcome": "failed", "assertion": True}})
    by_source = SuiteResult(
        outcomes={"t::new": {"outcome": "failed", "assertion": False, "source_raised": True}}
    )
    assert not killed(by_old, ["t::new"], original) and not killed(by_error, ["t::new"], original)
    assert killed(by_new, ["t::new"], original) and killed(by_source, ["t::new"], original)
    failing_before = SuiteResult(outcomes={"t::new": {"outcome": "failed"}})
    assert not killed(by_source, ["t::new"], failing_before)


@pytest.mark.slow
def test_the_run_tells_exceptions_s_raised_from_the_tests_own(tmp_path: Path) -> None:
    dirs = GateDirs.create()
    shutil.copytree(make_workspace(tmp_path), dirs.ws)
    (dirs.ws / "tests" / "test_origin.py").write_text(
        "from strategy_host import StrategyError, call\n\n\n"
        f"def test_s_raises():\n    call({TARGET!r}, {{'A': 1.0}}, top_k=-1)\n\n\n"
        "def test_own_code_raises():\n"
        f"    weights = call({TARGET!r}, {{'A': 1.0}}, top_k=1)\n    1 / (weights['A'] - 1.0)\n\n\n"
        "def test_forged_strategy_error():\n    raise StrategyError('forged', 'ValueError')\n\n\n"
        # pytest's unittest plugin hands a TestCase's failure over late: the judge must still see it
        "import unittest\n\n\nclass TestCaseStyle(unittest.TestCase):\n"
        f"    def test_s_raises_in_a_test_case(self):\n        call({TARGET!r}, "
        "{'A': 1.0}, top_k=-1)\n\n"
        "    def test_assert_equal_fails(self):\n"
        f"        self.assertEqual(call({TARGET!r}, {{'A': 1.0}}, top_k=1), {{'A': 0.5}})\n"
    )
    try:
        make_readable(dirs.ws)
        suite = run_suite(
            LOCK,
            dirs,
            SuiteRequest(workspace=dirs.ws, tests=("tests",), tag="o"),
            timeout_s=120,
            memory_mb=2048,
        )
    finally:
        dirs.remove()
    raised = {
        nodeid.rsplit("::", 1)[-1]: (entry.get("source_raised"), entry.get("assertion"))
        for nodeid, entry in suite.outcomes.items()
        if nodeid.startswith("tests/test_origin")
    }
    assert raised == {
        "test_s_raises": (True, False),
        "test_own_code_raises": (False, False),
        "test_forged_strategy_error": (False, False),
        "test_s_raises_in_a_test_case": (True, False),
        "test_assert_equal_fails": (False, True),
    }


@pytest.mark.slow
def test_new_files_in_new_folders_and_data_fixtures_are_accepted(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    code = diff_for(
        ws,
        {
            "strategies/signals/__init__.py": '"""Signals."""\n',
            "strategies/signals/ranking.py": (
                '"""Ranking helpers."""\n\n\ndef ranked(scores):\n'
                '    return sorted(scores, key=lambda a: (-scores[a], a))\n'
            ),
            MOMENTUM: fixed_momentum()
            .replace(
                "from typing import Dict, Mapping\n",
                "from typing import Dict, Mapping\n\nfrom strategies.signals.ranking "
                "import ranked as rank_desc\n",
            )
            .replace("sorted(scores, key=lambda a: (-scores[a], a))", "rank_desc(scores)"),
        },
    )
    verdict = run_gate(ws, "code-patch", code)
    assert verdict.accepted, verdict.violations
    data = {
        "tests/data/cases.json": json.dumps(
            [{"scores": {"A": 2.0, "B": 1.0}, "k": 1, "want": {"A": 1.0, "B": 0.0}}]
        )
        + "\n",
        "tests/data/prices.csv": "symbol,score\nA,2.0\nB,1.0\n",
        "tests/unit/test_from_data.py": (
            "import csv\nimport json\nfrom pathlib import Path\n\n"
            "from strategy_host import call\n\n"
            "DATA = Path(__file__).parent.parent / 'data'\n\n\ndef test_cases():\n"
            "    for case in json.loads((DATA / 'cases.json').read_text()):\n"
            f"        assert call({TARGET!r}, case['scores'], case['k']) == case['want']\n"
        ),
    }
    climbing = run_gate(ws, "test-gen", diff_for(ws, data), expect="green")
    assert "tests.reads_source" in {v.rule for v in climbing.violations}
    data["tests/unit/test_from_data.py"] = (
        "import json\nfrom pathlib import Path\n\nfrom strategy_host import call\n\n"
        "CASES = Path(__file__).parent / 'cases.json'\n\n\ndef test_cases_from_the_data_file():\n"
        "    for case in json.loads(CASES.read_text()):\n"
        f"        assert call({TARGET!r}, case['scores'], case['k']) == case['want']\n"
    )
    data["tests/unit/cases.json"] = data.pop("tests/data/cases.json")
    verdict = run_gate(ws, "test-gen", diff_for(ws, data), expect="green")
    assert verdict.accepted, verdict.violations


@pytest.mark.slow
def test_a_helper_module_of_a_new_test_folder_is_imported_as_pytest_resolves_it(
    tmp_path: Path,
) -> None:
    ws = make_workspace(tmp_path)
    files = {
        "tests/unit/helpers.py": (
            '"""Shared checks."""\n\n\ndef normalised(weights):\n'
            "    return {k: round(v, 9) for k, v in weights.items() if v}\n"
        ),
        "tests/unit/test_helped.py": (
            "import helpers\nfrom strategy_host import call\n\n\ndef test_top_one():\n"
            f"    weights = call({TARGET!r}, {{'A': 2.0, 'B': 1.0}}, top_k=1)\n"
            "    assert helpers.normalised(weights) == {'A': 1.0}\n"
        ),
    }
    verdict = run_gate(ws, "test-gen", diff_for(ws, files), expect="green")
    assert verdict.accepted, verdict.violations
    elsewhere = {
        "tests/other/helpers.py": files["tests/unit/helpers.py"],
        "tests/unit/test_helped.py": files["tests/unit/test_helped.py"],
    }
    verdict = run_gate(ws, "test-gen", diff_for(ws, elsewhere), expect="green")
    assert [(v.rule, v.path) for v in verdict.violations] == [
        ("sanitizer.import_not_allowed", "tests/unit/test_helped.py")
    ]  # not a sibling there
    files["tests/unit/helpers.py"] += "\n\nimport os\n\nHOME = os.environ\n"  # still judged as T
    verdict = run_gate(ws, "test-gen", diff_for(ws, files), expect="green")
    assert [(v.rule, v.path) for v in verdict.violations] == [
        ("sanitizer.import_not_allowed", "tests/unit/helpers.py")
    ]


@pytest.mark.slow
def test_red_tests_must_fail_on_trivial_candidates_in_place_of_s(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, "buggy")  # one name per selected stock, ties by input order
    tests = (
        "import pytest\n\n"
        + (ws / "tests" / "test_smoke.py").read_text()
        + f"\n\nMOMENTUM = {TARGET!r}\n"
    )
    differs = tests + (
        "\n\ndef test_not_today(universe):\n    weights = call(MOMENTUM, universe, top_k=1)\n"
        "    assert weights != {'AAA': 1.0}\n"
    )
    verdict = run_gate(ws, "test-gen", diff_for(ws, {"tests/test_smoke.py": differs}), expect="red")
    assert [(v.rule, "empty weights" in v.message) for v in verdict.violations] == [
        ("redgreen.trivial", True)
    ]
    any_name = tests + (
        "\n\ndef test_one_name():\n    weights = call(MOMENTUM, {'B': 1.0, 'A': 1.0}, top_k=1)\n"
        "    assert sorted(weights.values()) == [0.0, 1.0]\n"
    )
    verdict = run_gate(
        ws, "test-gen", diff_for(ws, {"tests/test_smoke.py": any_name}), expect="red"
    )
    assert [(v.rule, "first name" in v.message) for v in verdict.violations] == [
        ("redgreen.trivial", True)
    ]
    named = tests + (
        "\n\ndef test_ties_alphabetical():\n    weights = call(MOMENTUM, {'B': 1.0, 'A': "
        "1.0}, top_k=1)\n"
        "    assert weights == {'A': 1.0, 'B': 0.0}\n"
    )  # the mandate's one name
    verdict = run_gate(ws, "test-gen", diff_for(ws, {"tests/test_smoke.py": named}), expect="red")
    assert verdict.accepted, verdict.violations


@pytest.mark.slow
def test_red_mode_judges_an_old_test_the_mandate_names_as_a_red_test(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, "buggy")
    old = (ws / "tests" / "test_smoke.py").read_text()
    node_id = "tests/test_smoke.py::test_single_asset_gets_full_weight"
    pinned = (
        '    assert call("strategies.momentum:target_weights", {"ONLY": 1.0}, top_k=1) == '
        '{"ONLY": 1.0}\n'
    )
    mandate = (
        '    w = call("strategies.momentum:target_weights", {"ONLY": 1.0, "B": 0.0}, top_k=1)\n'
        '    assert w == {"ONLY": 1.0, "B": 0.0}  # the mandate: every name listed\n'
    )
    superseding = diff_for(ws, {"tests/test_smoke.py": old.replace(pinned, mandate)})
    verdict = run_gate(ws, "test-gen", superseding, expect="red", supersedes=[node_id])
    assert verdict.accepted, verdict.violations
    assert f"superseded old test (judged as a red test): {node_id}" in verdict.notes
    # not named by the approved mandate: the weakening rule, as in green mode
    verdict = run_gate(
        ws, "test-gen", superseding, expect="red", supersedes=["tests/test_smoke.py::test_other"]
    )
    assert [v.rule for v in verdict.violations] == ["tests.weakened"]
    loosened = (
        '    assert call("strategies.momentum:target_weights", {"ONLY": 1.0}, top_k=1)["ONLY"] '
        '> 0\n'
    )
    verdict = run_gate(
        ws,
        "test-gen",
        diff_for(ws, {"tests/test_smoke.py": old.replace(pinned, loosened)}),
        expect="red",
        supersedes=[node_id],
    )
    assert [v.rule for v in verdict.violations] == ["redgreen.not_red"]
    verdict = run_gate(ws, "test-gen", superseding, expect="green")
    assert "tests.weakened" in [v.rule for v in verdict.violations]


def test_supersedes_is_only_for_red_test_gen_and_takes_node_ids(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, "buggy")
    with pytest.raises(GateSetupError, match="only valid with --phase test-gen --expect red"):
        run_gate(ws, "test-gen", "", expect="green", supersedes=["tests/test_smoke.py::test_x"])
    with pytest.raises(GateSetupError, match="is not a test's node id"):
        run_gate(ws, "test-gen", "", expect="red", supersedes=["tests/test_smoke.py"])


@pytest.mark.slow
def test_trivial_candidates_replace_a_strategy_classes_weights(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, "market")  # S's weights come from STRATEGY's method
    old = (ws / "tests" / "test_momentum.py").read_text()
    red = (
        "\n\ndef test_all_four_names_listed():\n"
        "    panels = ramp({'A': 0.01, 'B': 0.03, 'C': -0.02, 'D': 0.02})\n"
        "    weights = open_strategy('momentum').target_weights(panels)\n"
        "    assert sorted(weights) == ['A', 'B', 'C', 'D'] and sum(weights.values()) == "
        "pytest.approx(1.0)\n"
    )
    verdict = run_gate(
        ws, "test-gen", diff_for(ws, {"tests/test_momentum.py": old + red}), expect="red"
    )
    assert [(v.rule, "equal weights" in v.message) for v in verdict.violations] == [
        ("redgreen.trivial", True)
    ]
