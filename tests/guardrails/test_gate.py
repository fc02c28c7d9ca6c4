"""The gate end to end on toy workspaces: contract, OS lock, holdout, red/green, verdict, CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardrails.errors import GateSetupError
from guardrails.gate import run_gate
from guardrails.sandbox.bwrap import BwrapLock
from tests.guardrails.gate_helpers import (
    CORPUS,
    MOMENTUM,
    created_workspaces_untouched,
    diff_for,
    make_workspace,
    shown,
    unchanged,
)

needs_bwrap = pytest.mark.skipif(BwrapLock.available() is not None, reason="needs bubblewrap")
FILE_RULES = (
    '\nallow = ["sanitizer.import_not_allowed", "sanitizer.builtin_not_allowed", '
    '"sanitizer.dunder", "sanitizer.io", "sanitizer.import_time"]\n'
)
# Source code that rewrites a locked test at import time, so every assertion passes (in its
# strategy host, where the tests are not even there under bwrap).
TAMPER = '''from pathlib import Path

_TEST = Path(__file__).resolve().parent.parent / "tests" / "test_smoke.py"
_TEST.write_text("def test_single_asset_gets_full_weight():\\n    pass\\n")
'''


@pytest.fixture(autouse=True)
def _workspaces_untouched() -> Iterator[None]:
    """The gate never modifies what it is given: every workspace and the corpus are hashed."""
    with created_workspaces_untouched(), unchanged(CORPUS):
        yield


def _tampering_patch(ws: Path) -> str:
    source = (ws / MOMENTUM).read_text()
    return diff_for(
        ws, {MOMENTUM: source.replace("from typing import", TAMPER + "from typing import")}
    )


@pytest.mark.slow
@needs_bwrap
def test_os_lock_makes_the_tampering_write_fail(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, guard_extra=FILE_RULES)
    with unchanged(ws):
        verdict = run_gate(ws, "code-patch", _tampering_patch(ws))
    assert not verdict.accepted and verdict.locks.backend == "bwrap"
    messages = " ".join(v.message for v in verdict.violations)
    assert "test_smoke.py" in messages and any(
        error in messages
        for error in ("[Errno 2] No such file or directory", "[Errno 30] Read-only file system")
    )
    # the write never happened, so the hashes agree: the kernel, not the hash, stopped it
    assert "lock.hash_mismatch" not in {v.rule for v in verdict.violations}
    assert verdict.locks.before == verdict.locks.after != ""


@pytest.mark.slow
def test_hash_anchoring_catches_the_same_write_without_an_os_lock(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, guard_extra=FILE_RULES)
    with unchanged(ws):
        verdict = run_gate(ws, "code-patch", _tampering_patch(ws), lock="hash-only")
    assert not verdict.accepted and verdict.locks.backend == "hash-only"
    mismatch = [v for v in verdict.violations if v.rule == "lock.hash_mismatch"]
    assert [v.path for v in mismatch] == ["tests/test_smoke.py"]
    assert verdict.locks.before != verdict.locks.after


@pytest.mark.slow
@needs_bwrap
def test_accepted_verdict_has_the_design_shape(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    source = (ws / MOMENTUM).read_text().replace("ranked", "order")
    with unchanged(ws):
        verdict = run_gate(ws, "code-patch", diff_for(ws, {MOMENTUM: source}))
    assert verdict.accepted, verdict.violations
    digest = verdict.locks.before
    assert len(digest) == 64 and set(json.loads(verdict.to_json())) - set(shown(verdict)) == {
        "duration_s"
    }
    assert shown(verdict) == {
        "accepted": True,
        "phase": "code-patch",
        "violations": [],
        "tests": {"collected": 5, "passed": 5, "failed": 0},
        "coverage": {"percent": 100.0, "min": 95.0},
        "locks": {"backend": "bwrap", "before": digest, "after": digest},
    }


@pytest.mark.slow
def test_the_same_patch_gets_the_same_verdict_every_time(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, guard_extra=FILE_RULES)
    patch = _tampering_patch(ws)
    first, second = (run_gate(ws, "code-patch", patch, lock="hash-only") for _ in range(2))
    assert not first.accepted and shown(first) == shown(second)  # all but the wall time


@pytest.mark.slow
def test_holdout_from_the_contract_rejects_with_test_names_only(tmp_path: Path) -> None:
    heldout = tmp_path / "heldout"
    heldout.mkdir()
    (heldout / "test_secret.py").write_text(
        "from strategy_host import call\n\n\n"
        "def test_secret_expectation():\n"
        "    assert call('strategies.momentum:target_weights', {'S': 1.0}, top_k=1) == {'S': 0.25}"
        "  # SECRET-LITERAL\n"
    )
    ws = make_workspace(tmp_path, guard_extra='holdout = "../heldout"\n')
    source = (ws / MOMENTUM).read_text().replace("ranked", "order")
    with unchanged(ws, heldout):
        verdict = run_gate(ws, "code-patch", diff_for(ws, {MOMENTUM: source}), lock="hash-only")
    assert [v.rule for v in verdict.violations] == ["holdout.failed"]
    message = verdict.violations[0].message
    assert message == "held-out test failed: test_secret.py::test_secret_expectation"
    assert "SECRET" not in verdict.to_json() and "0.25" not in verdict.to_json()


@pytest.mark.slow
def test_a_holdout_that_cannot_run_is_reported_without_detail(tmp_path: Path) -> None:
    heldout = tmp_path / "heldout"
    heldout.mkdir()
    (heldout / "test_broken.py").write_text("import no_such_module_secret\n")
    ws = make_workspace(tmp_path)
    source = (ws / MOMENTUM).read_text().replace("ranked", "order")
    verdict = run_gate(
        ws, "code-patch", diff_for(ws, {MOMENTUM: source}), holdout=heldout, lock="hash-only"
    )
    messages = [v.message for v in verdict.violations]
    assert "held-out test failed: test_broken.py" in messages
    assert "held-out test failed: <the held-out run did not complete>" in messages
    assert "no_such_module_secret" not in verdict.to_json()


@pytest.mark.slow
def test_red_requires_new_tests(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    tests = (ws / "tests" / "test_smoke.py").read_text()
    patch = diff_for(ws, {"tests/test_smoke.py": tests + "\n\nHELPER_SCORES = {'A': 1.0}\n"})
    verdict = run_gate(ws, "test-gen", patch, expect="red", lock="hash-only")
    assert [v.rule for v in verdict.violations] == ["redgreen.no_new_tests"]


@pytest.mark.slow
# Alike in shape to test_gate_judging.py's red-test checks (a workspace, one new test, a verdict):
# each names one rule.
def test_new_tests_must_exercise_the_source(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    tests = (ws / "tests" / "test_smoke.py").read_text()
    new = tests + (
        "\n\ndef test_universe_fixture(universe):\n"
        "    assert universe == {'AAA': 3.0, 'BBB': 1.0, 'CCC': 2.0}\n"
    )
    verdict = run_gate(ws, "test-gen", diff_for(ws, {"tests/test_smoke.py": new}), lock="hash-only")
    assert [v.rule for v in verdict.violations] == ["mutation.nothing_exercised"]


@pytest.mark.slow
def test_a_strong_new_test_passes_the_mutation_check(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, guard_extra="mutation_min_kill = 0.6\n")
    tests = (ws / "tests" / "test_smoke.py").read_text()
    new = tests + (
        "\n\nMOMENTUM = 'strategies.momentum:target_weights'\n\n\ndef test_two_of_three():\n"
        "    w = call(MOMENTUM, {'A': 1.0, 'B': 2.0, 'C': 3.0}, top_k=2)\n"
        "    assert w == {'A': 0.0, 'B': 0.5, 'C': 0.5}\n\n\n"
        "def test_zero_rejected():\n"
        "    with pytest.raises(ValueError):\n"
        "        call(MOMENTUM, {'A': 1.0}, top_k=0)\n\n\n"
        "def test_one_of_two():\n"
        "    assert call(MOMENTUM, {'A': 1.0, 'B': 2.0}, top_k=1) == {'A': 0.0, 'B': 1.0}\n"
    )
    new = "import pytest\n\n" + new
    with unchanged(ws):
        verdict = run_gate(
            ws,
            "test-gen",
            diff_for(ws, {"tests/test_smoke.py": new}),
            expect="green",
            lock="hash-only",
        )
    assert verdict.accepted, verdict.violations
    assert verdict.tests.collected == 8


def test_usage_errors(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    with pytest.raises(GateSetupError, match="unknown phase"):
        run_gate(ws, "deploy", "")
    with pytest.raises(GateSetupError, match="not valid for phase code-patch"):
        run_gate(ws, "code-patch", "", expect="red")
    with pytest.raises(GateSetupError, match="not valid"):
        run_gate(ws, "test-gen", "", expect="blue")
    with pytest.raises(GateSetupError, match="lies inside the workspace"):
        run_gate(ws, "code-patch", "", holdout=ws / "tests")


def test_malformed_and_empty_patches_are_rejected_before_any_copy(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    with unchanged(ws):
        empty = run_gate(ws, "code-patch", "", lock="hash-only")
        garbage = run_gate(ws, "code-patch", "please apply my fix\n", lock="hash-only")
    assert [v.rule for v in empty.violations] == ["diff.malformed"]
    assert "empty" in empty.violations[0].message
    assert [v.rule for v in garbage.violations] == ["diff.malformed"]
