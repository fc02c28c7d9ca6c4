"""Red-team runner: every case of a corpus through the gate, scored as blocked or accepted.

Attacks should be blocked and benign patches accepted. A corpus folder holds `cases.csv` with
these columns:
- id, patch, workspace, phase, expect.
- outcome: `blocked` for an attack, `accepted` for a benign patch.
- an optional `holdout` column.
- an optional `mechanism` column: the part of the gate that stops the attack. That is diff,
  sanitizer, tests, sandbox, outcomes, host, behaviour, holdout, coverage, redgreen, mutation ...
  It is shown in the scoreboard.
- an optional `supersedes` column: node ids, separated by spaces. They name the old tests the
  case's approved mandate makes obsolete. They are passed to a red test-gen run as `--supersedes`.
Paths are relative to the corpus folder. Workspaces live under `workspaces/`. `-` means "none".
Cases run two at a time; each gate run uses up to two sandboxes at once.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from guardrails.errors import GateSetupError
from guardrails.gate import run_gate
from guardrails.verdict import Verdict

OUTCOMES = ("blocked", "accepted")
# The mechanisms an attack can be tagged with, and the rules through which each shows.
MECHANISMS: dict[str, tuple[str, ...]] = {
    "diff": ("diff.", "lock.undeclared_change"),
    "sanitizer": ("sanitizer.",),
    "tests": ("tests.",),
    "sandbox": (
        "run.",
        "tests.failed",
        "tests.collection_error",
        "holdout.",
        "behaviour.",
        "mutation.",
        "lock.hash_mismatch",
    ),
    "outcomes": ("run.", "tests.order_dependent", "tests.failed"),
    # S in a host of its own. What it does to its process cannot reach the test run: patch pytest,
    # forge results, exit, die. So the gate sees its own wrong answers or its dead host.
    "host": (
        "run.host_failed",
        "tests.failed",
        "tests.collection_error",
        "holdout.failed",
        "behaviour.incomplete",
    ),
    "limits": ("run.timeout", "run.incomplete", "tests.failed"),
    "coverage": ("coverage.",),
    "holdout": ("holdout.",),
    "behaviour": ("behaviour.",),
    "redgreen": ("redgreen.",),
    "mutation": ("mutation.",),
}


@dataclass(frozen=True)
class Case:
    """One corpus row."""

    id: str
    patch: Path
    workspace: Path
    phase: str
    expect: str | None
    outcome: str
    holdout: Path | None = None
    mechanism: str = "-"
    supersedes: tuple[str, ...] = ()


@dataclass
class CaseResult:
    """A case and what the gate said about it."""

    case: Case
    verdict: Verdict | None
    error: str | None = None

    @property
    def got(self) -> str:
        """blocked, accepted or error."""
        if self.verdict is None:
            return "error"
        return "accepted" if self.verdict.accepted else "blocked"

    @property
    def by_mechanism(self) -> bool:
        """A blocked attack was caught by (a rule of) the mechanism it is tagged with."""
        prefixes = MECHANISMS.get(self.case.mechanism)
        return prefixes is None or any(rule.startswith(prefixes) for rule in self.rules)

    @property
    def as_expected(self) -> bool:
        """The gate did what the corpus says it must, by the tagged mechanism."""
        return self.got == self.case.outcome and (self.got != "blocked" or self.by_mechanism)

    @property
    def rules(self) -> list[str]:
        """Distinct rules that rejected the patch, in order of first appearance."""
        if self.verdict is None:
            return []
        return list(dict.fromkeys(v.rule for v in self.verdict.violations))


@dataclass
class RedTeamReport:
    """All case results with the two headline ratios."""

    results: list[CaseResult] = field(default_factory=list)

    def _count(self, outcome: str) -> tuple[int, int]:
        cases = [r for r in self.results if r.case.outcome == outcome]
        return sum(r.as_expected for r in cases), len(cases)

    @property
    def attacks(self) -> tuple[int, int]:
        """(blocked, total) over attack cases."""
        return self._count("blocked")

    @property
    def benign(self) -> tuple[int, int]:
        """(accepted, total) over benign cases."""
        return self._count("accepted")

    @property
    def all_as_expected(self) -> bool:
        """Every attack blocked and every benign patch accepted."""
        return all(r.as_expected for r in self.results)


def _optional(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "-") else value


def load_cases(corpus: Path) -> list[Case]:
    """Read and validate cases.csv; GateSetupError naming the bad row."""
    index = corpus / "cases.csv"
    try:
        rows = list(csv.DictReader(index.read_text(encoding="utf-8").splitlines()))
    except OSError as exc:
        raise GateSetupError(f"cannot read the corpus index {index}: {exc}") from None
    cases = []
    for number, row in enumerate(rows, start=2):
        try:
            case = Case(
                id=row["id"].strip(),
                patch=corpus / row["patch"].strip(),
                workspace=corpus / "workspaces" / row["workspace"].strip(),
                phase=row["phase"].strip(),
                expect=_optional(row["expect"]),
                outcome=row["outcome"].strip(),
                holdout=corpus / h if (h := _optional(row.get("holdout"))) else None,
                mechanism=_optional(row.get("mechanism")) or "-",
                supersedes=tuple((_optional(row.get("supersedes")) or "").split()),
            )
        except (KeyError, AttributeError):
            raise GateSetupError(
                f"{index}:{number}: a row needs id, patch, workspace, phase, expect and outcome"
            ) from None
        if case.outcome not in OUTCOMES or not case.patch.is_file():
            raise GateSetupError(
                f"{index}:{number}: outcome must be blocked or accepted and the "
                f"patch {case.patch} must exist"
            )
        if case.mechanism not in (*MECHANISMS, "-"):
            raise GateSetupError(
                f"{index}:{number}: unknown mechanism {case.mechanism!r}; "
                f"choose one of {', '.join(MECHANISMS)}"
            )
        cases.append(case)
    return cases


def run_case(case: Case, lock: str | None = None) -> CaseResult:
    """Judge one case; a setup error is recorded, not raised."""
    try:
        verdict = run_gate(
            case.workspace,
            case.phase,
            case.patch.read_bytes().decode("utf-8"),
            expect=case.expect,
            holdout=case.holdout,
            lock=lock,
            supersedes=case.supersedes,
        )
    except GateSetupError as exc:
        return CaseResult(case, None, error=str(exc))
    return CaseResult(case, verdict)


def run_corpus(
    corpus: Path,
    lock: str | None = None,
    jobs: int = 2,
    progress: Callable[[int, int, str], None] | None = None,
) -> RedTeamReport:
    """Every case of the corpus (`jobs` at a time), reported in file order.

    `progress(done, total, case id)` is called as each case finishes, from the worker threads.
    """
    cases = load_cases(corpus)
    finished = itertools.count(1)

    def judged(case: Case) -> CaseResult:
        result = run_case(case, lock)
        if progress is not None:
            progress(next(finished), len(cases), case.id)
        return result

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return RedTeamReport(list(pool.map(judged, cases)))


def _ratio(done: int, total: int) -> str:
    return f"{done}/{total} ({100.0 * done / total:.1f} %)" if total else "0/0"


def format_report(report: RedTeamReport) -> str:
    """The scoreboard: one line per case, then blocked/total and accepted/total."""
    lines = [
        (f"{'case':40} {'phase':10} {'mechanism':11} {'expected':9} {'got':9} rule that caught it")
    ]
    for result in report.results:
        mark = (
            ""
            if result.as_expected
            else "  <-- UNEXPECTED"
            if result.got != result.case.outcome
            else "  <-- NOT BY ITS MECHANISM"
        )
        detail = result.error or ", ".join(result.rules[:3]) or "-"
        lines.append(
            f"{result.case.id:40} {result.case.phase:10} {result.case.mechanism:11} "
            f"{result.case.outcome:9} {result.got:9} {detail}{mark}"
        )
    tagged = [r for r in report.results if r.case.outcome == "blocked" and r.case.mechanism != "-"]
    lines.append(f"attacks blocked: {_ratio(*report.attacks)}")
    lines.append(
        "caught by their tagged mechanism: "
        f"{_ratio(sum(r.by_mechanism for r in tagged), len(tagged))}"
    )
    lines.append(f"benign accepted: {_ratio(*report.benign)}")
    return "\n".join(lines)
