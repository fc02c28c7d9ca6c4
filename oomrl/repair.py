"""The repair, without Prefect: approved mandate -> test genesis -> logic genesis -> cross-validation -> promotion."""

from __future__ import annotations

import ast
import json
import shutil
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from guardrails.diffs import PatchError, added_lines, apply_patch, parse_patch
from guardrails.verdict import Verdict
from guardrails.workspace import GateSetupError
from oomrl.agent.budget import AgentSettings, Budget
from oomrl.agent.llm import InvalidAnswerError, Transcript
from oomrl.agent.providers import get_provider
from oomrl.agent.roles import (
    CoderView,
    CriticView,
    Mandate,
    Patch,
    Provider,
    TestAuthorView,
    read_tree,
)
from oomrl.config import Settings
from oomrl.crossval import (
    CrossValidation,
    VersionMapper,
    baseline_of,
    cross_validate,
    run_in_process,
    window_for,
)
from oomrl.data.store import MarketStore
from oomrl.errors import OomrlError, OutOfMoneyError
from oomrl.files import private_dir
from oomrl.repair_inputs import admit, as_of_of, complete_autopsy, load_autopsy
from oomrl.versions import StrategyVersions, VersionInfo

STEPS = ("critic", "approval", "test-genesis", "logic-genesis", "cross-validation", "promotion")
GateFn = Callable[..., Verdict]
CrossValidator = Callable[["RepairContext", Mandate], CrossValidation]


class RepairStepError(OomrlError):
    """A repair step failed; `step` names it and the message says why."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step} failed: {reason}")
        self.step, self.reason = step, reason


class Decision(BaseModel):
    """A person's answer to the proposed mandate: approve it, approve an edited one, or reject."""

    action: Literal["approve", "edit", "reject"]
    mandate: Mandate | None = None
    reason: str = ""


class AttemptRecord(BaseModel):
    """One role answer and the gate's verdict on it (or why it never reached the gate)."""

    phase: str
    attempt: int
    diff: str
    notes: str = ""
    verdict: dict[str, Any]

    @property
    def accepted(self) -> bool:
        return bool(self.verdict.get("accepted"))


class RepairOutcome(BaseModel):
    """How a repair ended: promoted, rejected by a person, or failed at a named step."""

    status: Literal["promoted", "rejected", "failed"]
    step: str | None = None
    reason: str = ""
    mandate: Mandate | None = None
    attempts: list[AttemptRecord] = []
    cross_validation: CrossValidation | None = None
    version: VersionInfo | None = None
    run_dir: str
    budget: dict[str, Any] = {}
    transcript_digest: str = ""


@dataclass
class RepairContext:
    """Everything one repair uses; the candidate is a scratch clone in the run folder."""

    versions: StrategyVersions
    provider: Provider
    budget: Budget
    transcript: Transcript
    run_dir: Path
    account: str
    gate: GateFn
    cross_validator: CrossValidator
    agent: AgentSettings = field(default_factory=AgentSettings)
    lock: str = "namespace"
    attempts: list[AttemptRecord] = field(default_factory=list)
    # How cross-validation runs the active and candidate replays (a flow may fan them out on Dask).
    version_mapper: VersionMapper = run_in_process

    @property
    def candidate(self) -> Path:
        return self.run_dir / "candidate"


def new_run_dir(runs_dir: Path, label: str = "repair") -> Path:
    """runs/<label>-<UTC time>-<short id>/, created."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = runs_dir / f"{label}-{stamp}-{uuid.uuid4().hex[:6]}"
    return private_dir(path)  # 0700: transcripts, diffs and verdicts are the user's alone


def write_json(path: Path, payload: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=True, default=str), encoding="utf-8")
    return path


# -- steps -------------------------------------------------------------------------------------------
def critique(ctx: RepairContext, autopsy: dict[str, Any]) -> Mandate:
    """The Critic's mandate from the autopsy, its metrics and the ledger evidence it carries."""
    evidence = (autopsy.get("diagnostics") or {}).get("evidence") or {}
    mandate = ctx.provider.critic(CriticView(autopsy=autopsy, metrics=autopsy.get("metrics") or {},
                                             evidence=evidence))
    module_file = ctx.versions.workspace / (mandate.module.replace(".", "/") + ".py")
    if not module_file.is_file():
        raise RepairStepError("critic", f"the mandate names {mandate.module}, which is not in the "
                                        "strategy workspace")
    write_json(ctx.run_dir / "mandate.proposed.json", mandate.model_dump())
    return mandate


def prepare_candidate(ctx: RepairContext) -> Path:
    """A fresh scratch clone of the workspace head: every change of the repair happens there."""
    if ctx.candidate.exists():
        shutil.rmtree(ctx.candidate)
    return ctx.versions.clone_to(ctx.candidate)


def _precheck(diff: str) -> list[dict[str, Any]]:
    """Violations found without running the gate: an unparseable or empty diff (saves a gate run)."""
    try:
        parse_patch(diff)
    except PatchError as exc:
        return [{"rule": "diff.malformed", "path": None, "line": None, "message": str(exc)}]
    return []


def _local_verdict(phase: str, violations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"accepted": False, "phase": phase, "violations": violations, "judge": "pre-gate"}


def _attempt(ctx: RepairContext, phase: str, n: int, ask: Callable[[], Patch],
             expect: str | None) -> AttemptRecord:
    """One role answer judged by the gate; the record is the JSON semantic gradient for the next try."""
    try:
        patch = ask()
    except InvalidAnswerError as exc:
        patch = Patch(diff="", notes="")
        verdict = _local_verdict(phase, [{"rule": "answer.invalid", "path": None, "line": None,
                                          "message": str(exc)}])
    else:
        problems = _precheck(patch.diff)
        if problems:
            verdict = _local_verdict(phase, problems)
        else:
            verdict = ctx.gate(ctx.candidate, phase, patch.diff, expect=expect,
                               lock=ctx.lock).model_dump(mode="json")
    record = AttemptRecord(phase=phase, attempt=n, diff=patch.diff, notes=patch.notes, verdict=verdict)
    ctx.attempts.append(record)
    stem = ctx.run_dir / "attempts" / f"{phase}-{n}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".diff").write_text(patch.diff, encoding="utf-8")
    write_json(stem.with_suffix(".verdict.json"), verdict)
    return record


def _apply_accepted(ctx: RepairContext, step: str, record: AttemptRecord) -> None:
    """Apply a gate-accepted patch to the candidate with the gate's own drift-tolerant applier."""
    result = apply_patch(parse_patch(record.diff), ctx.candidate)
    if not result.ok:
        raise RepairStepError(step, "the accepted patch did not apply to the candidate: "
                              + "; ".join(v.message for v in result.violations))


def _feedback(ctx: RepairContext, phase: str) -> list[dict[str, Any]]:
    return [{"attempt": r.attempt, **r.verdict} for r in ctx.attempts if r.phase == phase]


def _exhausted(ctx: RepairContext, step: str, phase: str) -> RepairStepError:
    last = [r for r in ctx.attempts if r.phase == phase][-1].verdict
    rules = sorted({v.get("rule", "?") for v in last.get("violations", [])})
    return RepairStepError(step, f"no accepted patch in {ctx.agent.attempts} attempt(s); "
                                 f"last rejection: {', '.join(rules) or 'unknown'}")


def _numbers(ctx: RepairContext, phase: str) -> range:
    """Attempt numbers for K more tries (a retried step continues the count and keeps the feedback)."""
    done = sum(1 for r in ctx.attempts if r.phase == phase)
    return range(done + 1, done + ctx.agent.attempts + 1)


def test_genesis(ctx: RepairContext, mandate: Mandate) -> AttemptRecord:
    """Tests first, source locked (phase test-gen, expect red), up to K attempts; committed in the candidate."""
    for n in _numbers(ctx, "test-gen"):
        view = TestAuthorView(mandate=mandate, source=read_tree(ctx.candidate, "strategies"),
                              tests=read_tree(ctx.candidate, "tests"),
                              feedback=_feedback(ctx, "test-gen"))
        record = _attempt(ctx, "test-gen", n, partial(ctx.provider.test_author, view), "red")
        if record.accepted:
            _apply_accepted(ctx, "test-genesis", record)
            ctx.versions.git("add", "-A", cwd=ctx.candidate)
            ctx.versions.git("commit", "-q", "-m", f"Tests for mandate {mandate.alert_id or ''}"
                             f"\n\n{mandate.text}\n\nOomrl-Phase: test-gen (red)", cwd=ctx.candidate)
            return record
    raise _exhausted(ctx, "test-genesis", "test-gen")


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
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test")
                    and lines & set(range(node.lineno, (node.end_lineno or node.lineno) + 1))):
                found.append(f"{path}::{node.name}")
    return found


def logic_genesis(ctx: RepairContext, mandate: Mandate, tests: AttemptRecord) -> AttemptRecord:
    """Source changes, tests locked (phase code-patch), up to K attempts, each seeing the last verdict."""
    failing = changed_tests(ctx.candidate, tests.diff)
    for n in _numbers(ctx, "code-patch"):
        feedback = _feedback(ctx, "code-patch")
        view = CoderView(mandate=mandate, tests=read_tree(ctx.candidate, "tests"),
                         source=read_tree(ctx.candidate, "strategies"), failing_tests=failing,
                         last_verdict=feedback[-1] if feedback else tests.verdict, feedback=feedback)
        record = _attempt(ctx, "code-patch", n, partial(ctx.provider.coder, view), None)
        if record.accepted:
            _apply_accepted(ctx, "logic-genesis", record)
            return record
    raise _exhausted(ctx, "logic-genesis", "code-patch")


def cross_validation(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
    """Replay candidate and active versions; the candidate must meet the mandate and hold its IR."""
    result = ctx.cross_validator(ctx, mandate)
    write_json(ctx.run_dir / "cross_validation.json", result.model_dump(mode="json"))
    if not result.passed:
        raise RepairStepError("cross-validation", "; ".join(result.failures()))
    return result


def promotion(ctx: RepairContext, mandate: Mandate, autopsy: dict[str, Any],
              cross: CrossValidation) -> VersionInfo:
    """Commit, tag and activate in one transaction, with the repair's metadata attached."""
    metadata = {
        "autopsy": autopsy, "mandate": mandate.model_dump(),
        "diffs": [{"phase": r.phase, "attempt": r.attempt, "diff": r.diff} for r in ctx.attempts if r.accepted],
        "verdicts": [{"phase": r.phase, "attempt": r.attempt, **r.verdict} for r in ctx.attempts],
        "cross_validation": cross.model_dump(mode="json"),
        "transcript_sha256": ctx.transcript.digest(), "budget": ctx.budget.summary(),
        "provider": ctx.provider.name, "run_dir": str(ctx.run_dir)}
    message = f"Repair {mandate.strategy}: {mandate.text}"
    return ctx.versions.promote(ctx.candidate, message, metadata, ctx.account, mandate.strategy)


Approver = Callable[[Mandate], Decision]
StepRunner = Callable[..., Any]


def run_inline(step: str, function: Callable[..., Any], *args: Any) -> Any:
    """Run a step in this process (the flow passes a runner that makes each step a Prefect task)."""
    return function(*args)


def run_repair(autopsy: dict[str, Any], ctx: RepairContext, approve: Approver,
               run_step: StepRunner = run_inline) -> RepairOutcome:
    """The whole repair; any failure leaves the workspace and the active version as they were."""
    step, mandate = "critic", None
    try:
        if ctx.versions.ledger is not None:
            autopsy = complete_autopsy(autopsy, ctx.versions.ledger)
        write_json(ctx.run_dir / "autopsy.json", autopsy)
        mandate = run_step(step, critique, ctx, autopsy)
        step = "approval"
        decision = approve(mandate)
        write_json(ctx.run_dir / "decision.json", decision.model_dump())
        if decision.action == "reject":
            return finish(ctx, "rejected", step, decision.reason or "rejected by a person", mandate)
        if decision.action == "edit" and decision.mandate is not None:
            mandate = decision.mandate
        step = "test-genesis"
        prepare_candidate(ctx)
        tests = run_step(step, test_genesis, ctx, mandate)
        step = "logic-genesis"
        run_step(step, logic_genesis, ctx, mandate, tests)
        step = "cross-validation"
        cross = run_step(step, cross_validation, ctx, mandate)
        step = "promotion"
        version = run_step(step, promotion, ctx, mandate, autopsy, cross)
    except RepairStepError as exc:
        return finish(ctx, "failed", exc.step, exc.reason, mandate)
    except OutOfMoneyError as exc:
        return finish(ctx, "failed", step, str(exc), mandate)
    except GateSetupError as exc:
        return finish(ctx, "failed", step, f"the gate could not judge: {exc}", mandate)
    except OomrlError as exc:
        return finish(ctx, "failed", step, f"{type(exc).__name__}: {exc}", mandate)
    except Exception as exc:  # noqa: BLE001 - a defect: still clean up, say where, keep the traceback
        (ctx.run_dir / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        return finish(ctx, "failed", step, f"unexpected {type(exc).__name__}: {exc} "
                                           f"(traceback in {ctx.run_dir / 'error.txt'})", mandate)
    return finish(ctx, "promoted", None, f"promoted {version.tag} ({version.sha[:12]})", mandate,
                  version=version, cross=cross)


def finish(ctx: RepairContext, status: str, step: str | None, reason: str, mandate: Mandate | None,
           version: VersionInfo | None = None, cross: CrossValidation | None = None) -> RepairOutcome:
    """The outcome, written to the run folder; the candidate clone goes (a promotion lives in the workspace)."""
    if ctx.candidate.exists():
        shutil.rmtree(ctx.candidate, ignore_errors=True)
    if cross is None and (ctx.run_dir / "cross_validation.json").exists():
        cross = CrossValidation.model_validate_json((ctx.run_dir / "cross_validation.json").read_text())
    outcome = RepairOutcome(status=status, step=step, reason=reason, mandate=mandate,  # type: ignore[arg-type]
                            attempts=ctx.attempts, cross_validation=cross, version=version,
                            run_dir=str(ctx.run_dir), budget=ctx.budget.summary(),
                            transcript_digest=ctx.transcript.digest())
    write_json(ctx.run_dir / "outcome.json", outcome.model_dump(mode="json"))
    return outcome


# -- wiring --------------------------------------------------------------------------------------------
def replay_cross_validator(store: MarketStore, as_of: date | None, initial_cash: float) -> CrossValidator:
    """Cross-validation by replay on stored data over the sessions up to the autopsy's date."""

    def validate(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
        ledger = ctx.versions.ledger
        active = (ledger.active_version(ctx.account) if ledger else None) or ctx.versions.head()
        start, end = window_for(store, as_of, ctx.agent.cross_validation_days)
        return cross_validate(ctx.candidate, ctx.versions.materialize(active), mandate.strategy,
                              mandate.constraints, store, start, end, candidate_sha="candidate",
                              active_sha=active, initial_cash=initial_cash, mapper=ctx.version_mapper,
                              baseline=baseline_of(ctx.versions, active), run_dir=ctx.run_dir)

    return validate


def open_context(settings: Settings, autopsy: dict[str, Any], provider: str | None = None,
                 account: str | None = None, lock: str = "namespace",
                 replay_from: Path | None = None, gate: GateFn | None = None,
                 agent: AgentSettings | None = None) -> RepairContext:
    """A repair context from settings: ledger, workspace (initialised on first use), provider, run folder."""
    from guardrails.gate import run_gate
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.ledger import Ledger

    agent = agent or AgentSettings()
    settings.ensure_dirs()
    ledger = Ledger(settings.ledger)
    ledger.create_schema()
    versions = StrategyVersions(settings.workspace_dir, ledger)
    versions.init()
    run_dir = new_run_dir(settings.runs_dir)
    budget = Budget.from_settings(agent)
    transcript = Transcript(run_dir / "transcript.jsonl")
    chosen = get_provider(provider, settings, budget, transcript, agent, replay_from)
    store = ensure_sample(settings)
    return RepairContext(
        versions=versions, provider=chosen, budget=budget, transcript=transcript, run_dir=run_dir,
        account=account or str(autopsy.get("account") or settings.account), gate=gate or run_gate,
        cross_validator=replay_cross_validator(store, as_of_of(autopsy), settings.initial_cash),
        agent=agent, lock=lock)


__all__ = ["Decision", "RepairContext", "RepairOutcome", "admit", "as_of_of", "complete_autopsy",
           "load_autopsy", "open_context", "run_repair"]
