"""What each role is told: the autopsy's evidence, and verdicts as the paper's semantic gradient.

EncodeSemantics turns a gate verdict into what the next attempt needs. Per violation: the rule, the
file and line, the message and the traceback. Also the lines of code it points at, only from files
the role may see. A failed cross-validation becomes the evidence of what the tests missed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from guardrails.verdict import Verdict, Violation
from oomrl.agent.roles import MissedCheck
from oomrl.agent.verdicts import AttemptVerdict
from oomrl.diagnostics.autopsy import Autopsy, LossAlert

MAX_VIOLATIONS = 20
MAX_FIELD_CHARS = 2_000
EXCERPT_CONTEXT = 2
# A traceback frame: `File "/tmp/x/ws/strategies/m.py", line 12` or `strategies/m.py:12: in f`.
FRAME = re.compile(
    r'File "(?P<quoted>[^"]+)", line (?P<qline>\d+)|(?P<plain>[\w./-]+\.py):(?P<pline>\d+)'
)


def role_evidence(autopsy: Autopsy | LossAlert) -> dict[str, Any]:
    """The autopsy's evidence for the Test Author and the Coder: trigger, metrics, root cause,
    ledger. A loss alert has only its date."""
    if not isinstance(autopsy, Autopsy):
        return {"as_of": autopsy.as_of.isoformat()} if autopsy.as_of else {}
    diagnostics = autopsy.diagnostics  # read by attribute; JSON made field by field for the prompt
    found = {
        "as_of": autopsy.as_of.isoformat(),
        "severity": autopsy.severity,
        "trigger": autopsy.trigger.model_dump(mode="json"),
        "metrics": autopsy.metrics.model_dump(mode="json"),
        "root_cause": diagnostics.root_cause,
        "findings": list(diagnostics.findings),
        "ledger": diagnostics.evidence.model_dump(mode="json"),
        "strategy_version": diagnostics.strategy_version,
    }
    return {key: value for key, value in found.items() if value not in (None, [], {}, "")}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_FIELD_CHARS else text[:MAX_FIELD_CHARS] + " …"


def _visible_path(raw: str, visible: Mapping[str, str]) -> str | None:
    """The workspace-relative path a traceback's (often absolute, scratch) path names, if
    visible."""
    return next((path for path in visible if raw == path or raw.endswith("/" + path)), None)


def locate(
    traceback: str, visible: Mapping[str, str], within: str | None = None
) -> tuple[str | None, int | None]:
    """The innermost frame of a traceback in a file the role may see (in `within` when given)."""
    where: tuple[str | None, int | None] = (None, None)
    for match in FRAME.finditer(traceback):
        path = _visible_path(match.group("quoted") or match.group("plain"), visible)
        if path is not None and within in (None, path):
            where = (path, int(match.group("qline") or match.group("pline")))
    return where


def excerpt(visible: Mapping[str, str], path: str | None, line: int | None) -> str | None:
    """The numbered lines around `line` of a visible file, the line itself marked with `>`."""
    if path is None or line is None or path not in visible:
        return None
    lines = visible[path].splitlines()
    if not 1 <= line <= len(lines):
        return None
    low, high = max(1, line - EXCERPT_CONTEXT), min(len(lines), line + EXCERPT_CONTEXT)
    return "\n".join(
        f"{'>' if n == line else ' '} {n:4d} | {lines[n - 1]}" for n in range(low, high + 1)
    )


def encode_violation(violation: Violation, visible: Mapping[str, str]) -> dict[str, Any]:
    """One violation as rule, file, line, message, traceback and the code it points at."""
    message, _, traceback = violation.message.partition("\n")
    path, line = violation.path, violation.line
    if traceback and line is None:  # the failing line: in the violation's file, else innermost
        frame_path, frame_line = locate(traceback, visible, path if path in visible else None)
        if frame_path is not None:
            path, line = frame_path, frame_line
    return {
        "rule": violation.rule,
        "file": path,
        "line": line,
        "message": _clip(message),
        "traceback": _clip(traceback) if traceback else None,
        "code": excerpt(visible, path, line),
    }


def encode_verdict(
    verdict: AttemptVerdict, visible: Mapping[str, str], attempt: int
) -> dict[str, Any]:
    """A verdict as the next attempt should read it (the paper's EncodeSemantics).

    One given before the gate ran has no test counts or coverage."""
    violations = verdict.violations
    rules = sorted({v.rule for v in violations})
    if verdict.accepted:
        summary = "accepted by the gate"
    else:
        summary = (
            f"rejected: {len(violations)} violation(s) of {', '.join(rules) or 'unknown rules'}"
        )
    if isinstance(verdict, Verdict):
        tests, coverage = verdict.tests, verdict.coverage
        summary += f"; tests: {tests.passed} passed, {tests.failed} failed of {tests.collected}"
        if coverage.percent:
            summary += f"; branch coverage {coverage.percent} % (min {coverage.min})"
    encoded = {
        "attempt": attempt,
        "phase": verdict.phase,
        "accepted": verdict.accepted,
        "summary": summary,
        "violations": [encode_violation(v, visible) for v in violations[:MAX_VIOLATIONS]],
    }
    if len(violations) > MAX_VIOLATIONS:
        encoded["more_violations"] = len(violations) - MAX_VIOLATIONS
    return encoded


def missed_checks(cross: Any) -> list[MissedCheck]:
    """The failed cross-validation checks: what the accepted tests let through."""
    return [
        MissedCheck(check=check.name, detail=check.detail, window=f"{cross.start}..{cross.end}")
        for check in cross.checks
        if not check.passed
    ]


def encode_cross_validation(cross: Any, attempt: int) -> dict[str, Any]:
    """A failed cross-validation of the Coder's accepted patch, in the verdict encoding."""
    missed = missed_checks(cross)
    return {
        "attempt": attempt,
        "phase": "cross-validation",
        "accepted": False,
        "summary": (
            f"the gate accepted this patch, but replayed over {cross.start}..{cross.end} "
            f"it failed {', '.join(m.check for m in missed)}"
        ),
        "violations": [
            {
                "rule": f"crossval.{m.check}",
                "file": None,
                "line": None,
                "message": m.detail,
                "traceback": None,
                "code": None,
            }
            for m in missed
        ],
    }
