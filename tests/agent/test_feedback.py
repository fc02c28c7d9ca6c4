"""EncodeSemantics: verdicts as rule, file, line, message, traceback and code; evidence; missed
checks."""

from __future__ import annotations

from datetime import date
from typing import Any

from guardrails.verdict import Verdict, Violation
from oomrl.agent.feedback import (
    MAX_VIOLATIONS,
    encode_cross_validation,
    encode_verdict,
    locate,
    missed_checks,
    role_evidence,
)
from oomrl.agent.roles import MissedCheck
from oomrl.agent.verdicts import PreGateVerdict
from oomrl.diagnostics.autopsy import Autopsy, LossAlert
from oomrl.repair.crossval import Check, CrossValidation
from tests.repair_inputs_for_tests import autopsy_json, pending_alert

SOURCE = "strategies/m.py"
TESTS = "tests/strategies/test_m.py"
VISIBLE = {
    SOURCE: "".join(f"line {n}\n" for n in range(1, 11)),
    TESTS: "def test_x():\n    assert f() == 2\n",
}
FAILED = {
    "rule": "tests.failed",
    "path": TESTS,
    "line": None,
    "message": (
        "tests/strategies/test_m.py::test_x: failed\n"
        '  File "/tmp/gate-x1/ws/tests/strategies/test_m.py", line 2, in test_x\n'
        "    assert f() == 2\n"
        "/tmp/gate-x1/ws/strategies/m.py:7: in f\n"
        "AssertionError: assert 1 == 2"
    ),
}


def verdict(*violations: dict[str, Any], accepted: bool = False) -> Verdict:
    return Verdict.model_validate(
        {
            "accepted": accepted,
            "phase": "code-patch",
            "violations": list(violations),
            "tests": {"collected": 9, "passed": 8, "failed": 1},
            "coverage": {"percent": 96.5, "min": 95.0},
            "locks": {"backend": "test"},
        }
    )


def test_a_failed_test_is_encoded_with_its_innermost_visible_frame_and_code() -> None:
    encoded = encode_verdict(verdict(FAILED), VISIBLE, attempt=3)
    assert encoded["attempt"] == 3 and encoded["accepted"] is False
    assert encoded["summary"] == (
        "rejected: 1 violation(s) of tests.failed; tests: 8 passed, 1 failed "
        "of 9; branch coverage 96.5 % (min 95.0)"
    )
    item = encoded["violations"][0]
    assert (item["rule"], item["file"], item["line"]) == ("tests.failed", TESTS, 2)
    assert item["message"] == "tests/strategies/test_m.py::test_x: failed"
    assert item["traceback"].endswith("AssertionError: assert 1 == 2")
    assert item["code"].splitlines() == ["     1 | def test_x():", ">    2 |     assert f() == 2"]
    unplaced = encode_verdict(verdict({**FAILED, "path": None}), VISIBLE, 1)["violations"][0]
    assert (unplaced["file"], unplaced["line"]) == (SOURCE, 7)  # the innermost visible frame
    assert unplaced["code"].splitlines()[2] == ">    7 | line 7"


def test_a_located_violation_keeps_its_place_and_hidden_files_show_no_code() -> None:
    sanitizer = {
        "rule": "sanitizer.file_read",
        "path": SOURCE,
        "line": 1,
        "message": "reads a file",
    }
    held_out = {
        "rule": "holdout.failed",
        "path": None,
        "line": None,
        "message": "held-out test failed: heldout_tests/test_h.py::test_h",
    }
    elsewhere = {"rule": "tests.failed", "path": "tests/other.py", "line": 40, "message": "x"}
    first, hidden, unknown = encode_verdict(verdict(sanitizer, held_out, elsewhere), VISIBLE, 1)[
        "violations"
    ]
    assert (first["file"], first["line"], first["code"].splitlines()[0]) == (
        SOURCE,
        1,
        ">    1 | line 1",
    )
    assert hidden == {
        "rule": "holdout.failed",
        "file": None,
        "line": None,
        "traceback": None,
        "code": None,
        "message": "held-out test failed: heldout_tests/test_h.py::test_h",
    }
    assert unknown["code"] is None  # a file the role cannot see, or a line past its end
    assert locate("no frames here", VISIBLE) == (None, None)


def test_many_violations_are_capped_and_long_messages_clipped() -> None:
    many = [{"rule": "r", "path": None, "line": None, "message": "m" * 5000}] * (MAX_VIOLATIONS + 3)
    encoded = encode_verdict(verdict(*many), {}, 1)
    assert len(encoded["violations"]) == MAX_VIOLATIONS and encoded["more_violations"] == 3
    assert encoded["violations"][0]["message"].endswith(" …")
    assert len(encoded["violations"][0]["message"]) < 2_100
    accepted = encode_verdict(verdict(accepted=True), {}, 2)
    assert accepted["summary"].startswith("accepted by the gate;") and accepted["violations"] == []
    early = encode_verdict(
        PreGateVerdict(
            phase="test-gen", violations=[Violation(rule="diff.malformed", message="no hunk")]
        ),
        {},
        3,
    )
    # No gate ran: no counts
    assert early["summary"] == "rejected: 1 violation(s) of diff.malformed"


def test_role_evidence_is_the_autopsys_diagnosis_without_empty_fields() -> None:
    data = autopsy_json(as_of="2024-07-15")
    data["diagnostics"] = {**data["diagnostics"], "findings": [], "strategy_version": None}
    assert role_evidence(Autopsy.model_validate(data)) == {
        "as_of": "2024-07-15",
        "severity": "critical",
        "trigger": data["trigger"],
        "metrics": data["metrics"],
        "root_cause": data["diagnostics"]["root_cause"],
        "ledger": data["diagnostics"]["evidence"],
    }
    assert role_evidence(LossAlert(alert_id="a-1", account="paper", as_of=date(2024, 7, 15))) == {
        "as_of": "2024-07-15"
    }  # a loss alert: its date, nothing else
    assert role_evidence(pending_alert("a-1")) == {}


def test_a_failed_replay_is_what_the_tests_missed() -> None:
    cross = CrossValidation(
        start=date(2024, 3, 1),
        end=date(2024, 7, 15),
        rows=[],
        checks=[
            Check(name="rebalance", passed=True, detail="ok"),
            Check(name="max_weekly_turnover", passed=False, detail="busiest week traded 0.9000"),
        ],
    )
    assert missed_checks(cross) == [
        MissedCheck(
            check="max_weekly_turnover",
            detail="busiest week traded 0.9000",
            window="2024-03-01..2024-07-15",
        )
    ]
    encoded = encode_cross_validation(cross, attempt=4)
    assert encoded["phase"] == "cross-validation" and encoded["attempt"] == 4
    assert encoded["violations"][0]["rule"] == "crossval.max_weekly_turnover"
    assert "failed max_weekly_turnover" in encoded["summary"]
