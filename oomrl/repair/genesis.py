"""Test genesis and logic genesis: each role asked within the ceiling and the budget.

Each answer is judged by the gate. Each rejection is fed back encoded. A deterministic provider is
not asked what it already answered."""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from guardrails.patch import PatchError, added_lines, apply_patch, parse_patch
from guardrails.verdict import Verdict, Violation
from oomrl.agent.feedback import encode_verdict
from oomrl.agent.roles import CoderView, Mandate, Patch, TestAuthorView, read_tree
from oomrl.agent.verdicts import AttemptVerdict, PreGateVerdict, repeat_of
from oomrl.errors import InvalidAnswerError, RepairStepError
from oomrl.repair.context import AttemptRecord, RepairContext, write_json

STEP_OF = {"test-gen": "test-genesis", "code-patch": "logic-genesis"}


def _precheck(diff: str) -> list[Violation]:
    """Violations found without running the gate: an unparseable or empty diff. Saves a gate
    run."""
    try:
        parse_patch(diff)
    except PatchError as exc:
        return [Violation(rule="diff.malformed", message=str(exc))]
    return []


def _rules(record: AttemptRecord | None) -> str:
    if record is None:
        return "none"
    return ", ".join(sorted({v.rule for v in record.verdict.violations})) or "unknown"


def _of(ctx: RepairContext, phase: str) -> list[AttemptRecord]:
    return [r for r in ctx.state.attempts if r.phase == phase]


def _check_ceiling(ctx: RepairContext, phase: str) -> None:
    """The repair's attempt ceiling bounds role answers over every phase and round."""
    if len(ctx.state.attempts) >= ctx.agent.max_attempts:
        records = _of(ctx, phase)
        last = records[-1] if records else None
        raise RepairStepError(
            STEP_OF[phase],
            (
                f"no accepted patch within the ceiling of {ctx.agent.max_attempts} role "
                "answers per "
                f"repair (OOMRL_AGENT_MAX_ATTEMPTS); last rejection: {_rules(last)}"
            ),
        )


def _check_can_change(ctx: RepairContext, phase: str, key: str | None) -> None:
    """A deterministic provider shown what it already answered would answer the same. Do not ask."""
    if key is None:
        return
    same = next((r for r in _of(ctx, phase) if r.answer_key == key and not r.accepted), None)
    if same is not None:
        raise RepairStepError(
            STEP_OF[phase],
            (
                f"the {ctx.provider.name} provider is deterministic and nothing it reads "
                "changed since "
                f"attempt {same.attempt}, which was rejected ({_rules(same)}): asking again would "
                "repeat it"
            ),
        )


def _judge(
    ctx: RepairContext, phase: str, patch: Patch, expect: str | None, supersedes: list[str]
) -> AttemptVerdict:
    """The verdict on an answer. A repeat of a rejected answer gets its verdict again, no gate run.

    `supersedes`: the approved mandate's superseded tests. The gate takes them from the repair,
    never from the workspace it judges."""
    earlier = next(
        (
            r
            for r in _of(ctx, phase)
            if r.round == ctx.state.round
            and r.diff == patch.diff
            and not r.accepted
            and isinstance(r.verdict, Verdict)
        ),
        None,
    )
    if earlier is not None and isinstance(earlier.verdict, Verdict):
        return repeat_of(earlier.verdict, earlier.attempt)
    problems = _precheck(patch.diff)
    if problems:
        return PreGateVerdict(phase=phase, violations=problems)
    holdout = ctx.holdout if phase == "code-patch" else None
    return ctx.gate(
        ctx.candidate,
        phase,
        patch.diff,
        expect=expect,
        holdout=holdout,
        lock=ctx.lock,
        supersedes=supersedes,
    )


def _attempt(
    ctx: RepairContext,
    phase: str,
    role: str,
    view: BaseModel,
    ask: Callable[[], Patch],
    expect: str | None,
    key: str | None,
) -> AttemptRecord:
    """One role answer judged; the record carries the verdict encoded for the next try."""
    n = len(_of(ctx, phase)) + 1
    visible = {**view.source, **view.tests}  # type: ignore[attr-defined]
    ctx.record_inputs(role, view, f"{phase}-{n}")
    try:
        patch = ask()
    except InvalidAnswerError as exc:
        patch = Patch(diff="", notes="")
        verdict: AttemptVerdict = PreGateVerdict(
            phase=phase, violations=[Violation(rule="answer.invalid", message=str(exc))]
        )
    else:
        mandate: Mandate = view.mandate  # type: ignore[attr-defined]
        verdict = _judge(ctx, phase, patch, expect, mandate.supersedes if expect == "red" else [])
    record = AttemptRecord(
        phase=phase,
        attempt=n,
        round=ctx.state.round,
        diff=patch.diff,
        notes=patch.notes,
        verdict=verdict,
        feedback=encode_verdict(verdict, visible, n),
        answer_key=key,
    )
    ctx.state.attempts.append(record)
    stem = ctx.run_dir / "attempts" / f"{phase}-{n}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".diff").write_text(patch.diff, encoding="utf-8")
    write_json(stem.with_suffix(".verdict.json"), record.verdict.model_dump(mode="json"))
    return record


def _apply_accepted(ctx: RepairContext, step: str, record: AttemptRecord) -> None:
    """Apply a gate-accepted patch to the candidate with the gate's own drift-tolerant applier."""
    result = apply_patch(parse_patch(record.diff), ctx.candidate)
    if not result.ok:
        raise RepairStepError(
            step,
            "the accepted patch did not apply to the candidate: "
            + "; ".join(v.message for v in result.violations),
        )


def _asking_again(ctx: RepairContext, phase: str) -> None:
    last = [r for r in _of(ctx, phase) if r.round == ctx.state.round]
    if last and not last[-1].accepted:
        ctx.state.trail.move(
            STEP_OF[phase], f"attempt {last[-1].attempt} rejected: {_rules(last[-1])}"
        )


def test_genesis(ctx: RepairContext, mandate: Mandate) -> AttemptRecord:
    """Tests first, source locked (phase test-gen, expect red); the accepted tests are committed."""
    while True:
        _check_ceiling(ctx, "test-gen")
        view = TestAuthorView(
            mandate=mandate,
            evidence=ctx.state.evidence,
            source=read_tree(ctx.candidate, "strategies"),
            tests=read_tree(ctx.candidate, "tests"),
            feedback=[r.feedback for r in _of(ctx, "test-gen")],
            missed=ctx.state.missed,
            earlier_tests=[r.diff for r in _of(ctx, "test-gen") if r.accepted],
        )
        key = ctx.provider.answer_key("test_author", view)
        _check_can_change(ctx, "test-gen", key)
        _asking_again(ctx, "test-gen")
        record = _attempt(
            ctx,
            "test-gen",
            "test_author",
            view,
            partial(ctx.provider.test_author, view),
            "red",
            key,
        )
        if record.accepted:
            _apply_accepted(ctx, "test-genesis", record)
            ctx.versions.git("add", "-A", cwd=ctx.candidate)
            ctx.versions.git(
                "commit",
                "-q",
                "-m",
                f"Tests for mandate {mandate.alert_id or ''}"
                f"\n\n{mandate.text}\n\nOomrl-Phase: test-gen (red), round {ctx.state.round}",
                cwd=ctx.candidate,
            )
            return record


def changed_tests(root: Path, diff: str) -> list[str]:
    """`path::test_name` of every test function the accepted test diff added or changed."""
    if not diff:
        return []
    found = []
    for path, lines in sorted(added_lines(parse_patch(diff)).items()):
        file = root / path
        if not (path.endswith(".py") and file.is_file()):
            continue
        for node in ast.parse(file.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.FunctionDef)
                and node.name.startswith("test")
                and lines & set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            ):
                found.append(f"{path}::{node.name}")
    return found


def coder_feedback(ctx: RepairContext) -> list[dict[str, Any]]:
    """The Coder's own history: gate verdicts on its patches, and the replays of the accepted
    ones."""
    found: list[dict[str, Any]] = []
    for n in range(1, ctx.state.round + 1):
        found += [r.feedback for r in _of(ctx, "code-patch") if r.round == n]
        found += [f for f in ctx.state.cross_feedback if f.get("round") == n]
    return found


def logic_genesis(ctx: RepairContext, mandate: Mandate, tests: AttemptRecord) -> AttemptRecord:
    """Source changes, tests locked (phase code-patch), each attempt seeing the verdicts so far."""
    failing = changed_tests(ctx.candidate, tests.diff)
    while True:
        _check_ceiling(ctx, "code-patch")
        feedback = coder_feedback(ctx)
        view = CoderView(
            mandate=mandate,
            evidence=ctx.state.evidence,
            tests=read_tree(ctx.candidate, "tests"),
            source=read_tree(ctx.candidate, "strategies"),
            failing_tests=failing,
            last_verdict=feedback[-1]
            if feedback
            else (tests.feedback or tests.verdict.model_dump(mode="json")),
            feedback=feedback,
        )
        key = ctx.provider.answer_key("coder", view)
        _check_can_change(ctx, "code-patch", key)
        _asking_again(ctx, "code-patch")
        record = _attempt(
            ctx, "code-patch", "coder", view, partial(ctx.provider.coder, view), None, key
        )
        if record.accepted:
            _apply_accepted(ctx, "logic-genesis", record)
            return record
