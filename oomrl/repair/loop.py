"""The repair as the paper's Algorithm 1, without Prefect.

The steps are mandate -> approval -> test genesis -> logic genesis -> cross-validation ->
promotion. A failed replay has a way back to the tests. Every move is one of
`oomrl.agent.machine.TRANSITIONS` and is written to the run's trail.
"""

from __future__ import annotations

import logging
import shutil
import traceback
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from guardrails.errors import GateSetupError
from oomrl.agent.budget import Budget
from oomrl.agent.feedback import encode_cross_validation, missed_checks, role_evidence
from oomrl.agent.llm import Transcript
from oomrl.agent.machine import RUN_ENDS, Trail
from oomrl.agent.providers import get_provider
from oomrl.agent.roles import CriticView, Mandate, read_tree
from oomrl.data.store import MarketStore
from oomrl.diagnostics.autopsy import Autopsy, RepairInput, input_json
from oomrl.errors import AccountBusyError, OomrlError, OutOfMoneyError, RepairStepError
from oomrl.files import private_dir
from oomrl.portfolio.ledger import Ledger
from oomrl.repair.claims import ClaimBook, RepairClaim
from oomrl.repair.context import (
    AttemptRecord,
    CrossValidator,
    GateFn,
    RepairContext,
    RepairState,
    RoleInput,
    write_json,
)
from oomrl.repair.crossval import (
    CrossValidation,
    PromotionRule,
    baseline_of,
    cross_validate,
    window_for,
)
from oomrl.repair.endings import FAILED_STATE_NAMES, ending_name
from oomrl.repair.genesis import changed_tests, logic_genesis, test_genesis
from oomrl.repair.inputs import admit, as_of_of, complete_autopsy, load_autopsy, require_admitted
from oomrl.repair.probation import open_probations, shadow_name
from oomrl.repair.promotion import open_workspace, promote
from oomrl.repair.versions import StrategyVersions, VersionInfo
from oomrl.scratch import RUN_NOTE, clear_orphans, note_owner
from oomrl.settings import AgentSettings, OomrlSettings

logger = logging.getLogger(__name__)
STEPS = ("critic", "approval", "test-genesis", "logic-genesis", "cross-validation", "promotion")


class Decision(BaseModel):
    """A person's answer to the proposed mandate: approve it, approve an edited one, or reject."""

    action: Literal["approve", "edit", "reject"]
    mandate: Mandate | None = None
    reason: str = ""


class RepairOutcome(BaseModel):
    """How a repair ended: promoted, rejected by a person, or failed at a named step."""

    status: Literal["promoted", "probation", "rejected", "failed"]
    step: str | None = None
    reason: str = ""
    mandate: Mandate | None = None
    attempts: list[AttemptRecord] = []
    cross_validation: CrossValidation | None = None
    version: VersionInfo | None = None
    run_dir: str
    budget: dict[str, Any] = {}
    transcript_digest: str = ""
    rounds: int = 0
    trail: list[dict[str, str]] = []
    inputs: list[RoleInput] = []


class RepairNotPromoted(OomrlError):
    """The data of a Failed repair run: a repair that was refused or failed at a step."""

    def __init__(self, outcome: RepairOutcome) -> None:
        super().__init__(f"repair {outcome.status} at {outcome.step or '-'}: {outcome.reason}")
        self.outcome = outcome

    # Picklable with its outcome (Prefect may persist results)
    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.outcome,))


def new_run_dir(runs_dir: Path, label: str = "repair") -> Path:
    """runs/<label>-<UTC time>-<short id>/, created."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = runs_dir / f"{label}-{stamp}-{uuid.uuid4().hex[:6]}"
    return private_dir(path)  # 0700: transcripts, diffs and verdicts are the user's alone


# -- steps -----------------------------------------------------------------------------------------
def critique(ctx: RepairContext, autopsy: RepairInput) -> Mandate:
    """The Critic's mandate from the autopsy, its metrics and the ledger evidence it carries.

    The Critic reads the account's version (S and T). The mandate names the old tests it supersedes.
    """
    full = autopsy if isinstance(autopsy, Autopsy) else None  # a loss alert carries neither
    evidence = full.diagnostics.evidence.model_dump(mode="json") if full else {}
    metrics = full.metrics.model_dump(mode="json") if full else {}
    version = ctx.versions.materialize(ctx.state.base or ctx.versions.base_for(ctx.account))
    view = CriticView(
        autopsy=autopsy,
        metrics=metrics,
        evidence=evidence,
        source=read_tree(version, "strategies"),
        tests=read_tree(version, "tests"),
    )
    ctx.record_inputs("critic", view, "1")
    mandate = ctx.provider.critic(view)
    module_file = mandate.module.replace(".", "/") + ".py"
    if not ctx.versions.holds(ctx.state.base or ctx.versions.base_for(ctx.account), module_file):
        raise RepairStepError(
            "critic",
            f"the mandate names {mandate.module}, which is not in the account's strategy version",
        )
    write_json(ctx.run_dir / "mandate.proposed.json", mandate.model_dump())
    return mandate


def prepare_candidate(ctx: RepairContext) -> Path:
    """A fresh scratch clone at the account's version (`ctx.state.base`).

    Every change of the repair happens there.
    """
    if ctx.candidate.exists():
        shutil.rmtree(ctx.candidate)
    ctx.state.base = ctx.state.base or ctx.versions.base_for(ctx.account)
    return ctx.versions.clone_to(ctx.candidate, at=ctx.state.base)


def cross_validation(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
    """Replay candidate and active versions; the table is kept per round, the machine reads
    `passed`."""
    result = ctx.cross_validator(ctx, mandate)
    payload = result.model_dump(mode="json")
    write_json(ctx.run_dir / "cross_validation.json", payload)
    write_json(ctx.run_dir / f"cross_validation-{ctx.state.round}.json", payload)
    return result


def promotion(
    ctx: RepairContext, mandate: Mandate, autopsy: RepairInput, cross: CrossValidation
) -> VersionInfo:
    """Commit, tag and activate in one transaction, with the repair's metadata attached."""
    metadata = {
        "autopsy": input_json(autopsy),
        "mandate": mandate.model_dump(),
        "diffs": [
            {"phase": r.phase, "attempt": r.attempt, "round": r.round, "diff": r.diff}
            for r in ctx.state.attempts
            if r.accepted
        ],
        "verdicts": [
            {
                "phase": r.phase,
                "attempt": r.attempt,
                "round": r.round,
                **r.verdict.model_dump(mode="json"),
            }
            for r in ctx.state.attempts
        ],
        "cross_validation": cross.model_dump(mode="json"),
        "rounds": ctx.state.round,
        "transcript_sha256": ctx.transcript.digest(),
        "budget": ctx.budget.summary(),
        "inputs": [entry.model_dump() for entry in ctx.state.inputs],
        "trail": [m.__dict__ for m in ctx.state.trail.moves],
        "provider": ctx.provider.name,
        "run_dir": str(ctx.run_dir),
    }
    message = f"Repair {mandate.strategy}: {mandate.text}"
    if ctx.agent.probation_sessions and autopsy.as_of is None:
        raise RepairStepError(
            "promotion", "a probation starts on the alert's date, and this alert has none"
        )
    probation = (
        (autopsy.as_of, ctx.agent.probation_sessions)
        if ctx.agent.probation_sessions and autopsy.as_of is not None
        else None
    )
    return promote(
        ctx.versions, ctx.candidate, message, metadata, ctx.account, mandate.strategy, probation
    )


Approver = Callable[[Mandate], Decision]
StepRunner = Callable[..., Any]


def run_inline(step: str, function: Callable[..., Any], *args: Any) -> Any:
    """Run a step in this process.

    The flow passes a runner that makes each step a Prefect task.
    """
    return function(*args)


def genesis_rounds(ctx: RepairContext, mandate: Mandate, run_step: StepRunner) -> CrossValidation:
    """Tests, patch, replay; a failed replay goes back to the tests with what they missed."""
    while True:
        tests = run_step("test-genesis", test_genesis, ctx, mandate)
        ctx.state.trail.move("logic-genesis", f"tests accepted (attempt {tests.attempt})")
        code = run_step("logic-genesis", logic_genesis, ctx, mandate, tests)
        ctx.state.trail.move("cross-validation", f"patch accepted (attempt {code.attempt})")
        cross: CrossValidation = run_step("cross-validation", cross_validation, ctx, mandate)
        if cross.passed:
            return cross
        failures = "; ".join(cross.failures())
        if ctx.state.round >= ctx.agent.max_rounds:
            raise RepairStepError(
                "cross-validation",
                f"{failures} (round {ctx.state.round} of {ctx.agent.max_rounds})",
            )
        ctx.state.missed = missed_checks(cross)
        ctx.state.cross_feedback.append(
            {**encode_cross_validation(cross, code.attempt), "round": ctx.state.round}
        )
        # A fresh candidate: the Coder's change goes (the Test Author never sees it).
        # The tests go too. The Test Author writes them again, with what they missed.
        prepare_candidate(ctx)
        ctx.state.round += 1
        ctx.state.trail.move(
            "test-genesis", f"round {ctx.state.round}: the tests missed {failures}"
        )


def claim_for(
    ctx: RepairContext,
    prefix: str = "local",
    wait_s: float | None = None,
    say: Callable[[str], None] | None = None,
    limit: int | None = None,
) -> RepairClaim:
    """The repair claim of a repair run in this process (the CLI, the demo).

    It is named after its run folder and kept in the ledger's database, like the flow's.
    """
    ledger = ctx.versions.ledger
    if ledger is None:
        raise OomrlError("a repair needs a ledger to claim its account in")
    book = ClaimBook(str(getattr(ledger, "url", ""))).create()
    return RepairClaim(
        book,
        f"{prefix}-{ctx.run_dir.name}",
        ctx.account,
        ctx.claim_wait_s if wait_s is None else wait_s,
        say=say or logger.info,
        limit=limit,
    )


def hold_account(ctx: RepairContext, hold: Callable[[], None]) -> None:
    """Take the account's claim.

    A repair may have waited while another promoted for the account. Then it is stale: its alert
    was about a version the account no longer trades. It stops here.
    """
    try:
        hold()
    except AccountBusyError as exc:
        raise RepairStepError("claim", str(exc)) from None
    now = ctx.versions.base_for(ctx.account)
    if ctx.state.base is not None and now != ctx.state.base:
        raise RepairStepError(
            "superseded",
            f"account {ctx.account} now trades {ctx.versions.label(now)}, "
            f"promoted while this repair waited; this repair started from "
            f"{ctx.versions.label(ctx.state.base)}, which its alert was about: "
            "nothing to promote",
        )
    ledger = ctx.versions.ledger
    running = open_probations(ledger, ctx.account) if isinstance(ledger, Ledger) else []
    # Another repair of the account passed while this one waited: its challenger is judged first
    if running:
        raise RepairStepError(
            "superseded",
            f"account {ctx.account} has {running[0].tag} on probation since "
            f"{running[0].opened_on}, put there while this repair waited: the "
            "forward market judges it first; nothing to promote",
        )


def run_repair(
    autopsy: RepairInput,
    ctx: RepairContext,
    approve: Approver,
    run_step: StepRunner = run_inline,
    hold: Callable[[], None] | None = None,
) -> RepairOutcome:
    """The whole repair; any failure leaves the workspace and the active version as they were.

    `hold` runs after approval, before anything touches the candidate. It takes the account's
    repair claim. So one repair per account works on a candidate at a time. A paused repair holds
    nothing. Without `hold`, the repair claims its account in the ledger itself (`claim_for`).
    """
    require_admitted(autopsy)  # before the claim: a refusal holds nothing
    if hold is None:
        with claim_for(ctx) as claim:
            return run_repair(autopsy, ctx, approve, run_step, claim.hold)
    mandate = None
    ctx.state.trail.path = ctx.state.trail.path or ctx.run_dir / "trail.jsonl"
    try:
        done = (
            complete_autopsy(autopsy, ctx.versions.ledger)
            if ctx.versions.ledger is not None
            else autopsy
        )
        write_json(ctx.run_dir / "autopsy.json", input_json(done))
        ctx.state.evidence = ctx.state.evidence or role_evidence(done)
        ctx.state.base = ctx.state.base or ctx.versions.base_for(
            ctx.account
        )  # fixed for the whole repair
        mandate = run_step("critic", critique, ctx, done)
        ctx.state.trail.move("approval", f"mandate for {mandate.module}: {mandate.text}")
        decision = approve(mandate)
        write_json(ctx.run_dir / "decision.json", decision.model_dump())
        if decision.action == "reject":
            return finish(
                ctx, "rejected", "approval", decision.reason or "rejected by a person", mandate
            )
        if decision.action == "edit" and decision.mandate is not None:
            mandate = decision.mandate
        hold_account(ctx, hold)
        ctx.state.trail.move("test-genesis", f"{decision.action}: {decision.reason}".rstrip(": "))
        prepare_candidate(ctx)
        cross = genesis_rounds(ctx, mandate, run_step)
        ctx.state.trail.move("promotion", "the replay passed every check")
        version = run_step("promotion", promotion, ctx, mandate, done, cross)
    except RepairStepError as exc:
        return finish(ctx, "failed", exc.step, exc.reason, mandate)
    except OutOfMoneyError as exc:
        return finish(ctx, "failed", ctx.state.trail.state, str(exc), mandate)
    except GateSetupError as exc:
        return finish(
            ctx, "failed", ctx.state.trail.state, f"the gate could not judge: {exc}", mandate
        )
    except OomrlError as exc:
        return finish(ctx, "failed", ctx.state.trail.state, f"{type(exc).__name__}: {exc}", mandate)
    except Exception as exc:  # noqa: BLE001 - a defect: still clean up, say where, keep the traceback
        (ctx.run_dir / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
        return finish(
            ctx,
            "failed",
            ctx.state.trail.state,
            f"unexpected {type(exc).__name__}: {exc} (traceback in {ctx.run_dir / 'error.txt'})",
            mandate,
        )
    if ctx.agent.probation_sessions:
        return finish(
            ctx,
            "probation",
            None,
            f"{version.tag} ({version.sha[:12]}) on probation: it trades the "
            f"shadow book {shadow_name(ctx.account, version.tag)} for "
            f"{ctx.agent.probation_sessions} "
            "sessions before the daily chain decides",
            mandate,
            version=version,
            cross=cross,
        )
    return finish(
        ctx,
        "promoted",
        None,
        f"promoted {version.tag} ({version.sha[:12]})",
        mandate,
        version=version,
        cross=cross,
    )


def finish(
    ctx: RepairContext,
    status: str,
    step: str | None,
    reason: str,
    mandate: Mandate | None,
    version: VersionInfo | None = None,
    cross: CrossValidation | None = None,
) -> RepairOutcome:
    """The outcome, written to the run folder.

    The candidate clone goes; a promotion lives in the workspace.
    """
    if ctx.state.trail.state not in RUN_ENDS:
        ctx.state.trail.move(status, reason[:500])
    if ctx.candidate.exists():
        shutil.rmtree(ctx.candidate, ignore_errors=True)
    if cross is None and (ctx.run_dir / "cross_validation.json").exists():
        cross = CrossValidation.model_validate_json(
            (ctx.run_dir / "cross_validation.json").read_text()
        )
    outcome = RepairOutcome(
        status=status,
        step=step,
        reason=reason,
        mandate=mandate,
        attempts=ctx.state.attempts,
        cross_validation=cross,
        version=version,
        run_dir=str(ctx.run_dir),
        budget=ctx.budget.summary(),
        transcript_digest=ctx.transcript.digest(),
        rounds=ctx.state.round,
        trail=[m.__dict__ for m in ctx.state.trail.moves],
        inputs=ctx.state.inputs,
    )
    write_json(ctx.run_dir / "outcome.json", outcome.model_dump(mode="json"))
    (ctx.run_dir / RUN_NOTE).unlink(missing_ok=True)  # ended: nothing of it is an orphan
    return outcome


# -- wiring ----------------------------------------------------------------------------------------
def replay_cross_validator(
    store: MarketStore, as_of: date | None, initial_cash: float
) -> CrossValidator:
    """Cross-validation by replay on stored data over the sessions up to the autopsy's date."""

    def validate(ctx: RepairContext, mandate: Mandate) -> CrossValidation:
        active = ctx.state.base or ctx.versions.base_for(ctx.account)
        start, end = window_for(store, as_of, ctx.agent.cross_validation_days)
        return cross_validate(
            ctx.candidate,
            ctx.versions.materialize(active),
            mandate.strategy,
            mandate.constraints,
            store,
            start,
            end,
            candidate_sha="candidate",
            active_sha=active,
            initial_cash=initial_cash,
            mapper=ctx.version_mapper,
            baseline=baseline_of(ctx.versions, active, ctx.account),
            run_dir=ctx.run_dir,
            rule=PromotionRule(
                test=ctx.agent.promotion_test,
                margin=ctx.agent.promotion_margin,
                z=ctx.agent.promotion_z,
            ),
        )

    return validate


def open_context(
    settings: OomrlSettings,
    autopsy: RepairInput,
    provider: str | None = None,
    account: str | None = None,
    lock: str = "namespace",
    replay_from: Path | None = None,
    gate: GateFn | None = None,
    agent: AgentSettings | None = None,
    probation: int | None = None,
) -> RepairContext:
    """A repair context from settings.

    It holds ledger, workspace (initialised on first use), the account's LLM budget, provider, run
    folder.
    """
    from guardrails.gate import run_gate
    from oomrl.agent.capital import LLMBudgetBook
    from oomrl.data.sample import ensure_sample
    from oomrl.portfolio.ledger import Ledger

    require_admitted(autopsy)  # before anything is written: no run folder for a refusal
    agent = agent or settings.agent
    if probation is not None:  # this run's own choice over OOMRL_AGENT_PROBATION_SESSIONS
        agent = agent.model_copy(update={"probation_sessions": max(int(probation), 0)})
    if agent.holdout_dir is not None and not agent.holdout_dir.is_dir():
        raise OomrlError(
            f"OOMRL_AGENT_HOLDOUT_DIR {agent.holdout_dir} is not a folder of held-out tests"
        )
    settings.store.ensure_dirs()
    ledger = Ledger(settings.ledger_url)
    ledger.create_schema()
    versions = StrategyVersions(settings.store.workspace_dir, ledger)
    open_workspace(versions)  # finishes or undoes a promotion whose process was killed.
    # And what a killed repair left: its candidate, its gate's scratch.
    clear_orphans(settings.store.runs_dir)
    run_dir = note_owner(new_run_dir(settings.store.runs_dir), RUN_NOTE)
    name = account or autopsy.account
    budget = Budget.from_settings(agent, LLMBudgetBook(ledger), name, run_dir.name)
    transcript = Transcript(run_dir / "transcript.jsonl")
    chosen = get_provider(provider, settings, budget, transcript, agent, replay_from)
    store = ensure_sample(settings)
    return RepairContext(
        versions=versions,
        provider=chosen,
        budget=budget,
        transcript=transcript,
        run_dir=run_dir,
        account=name,
        gate=gate or run_gate,
        cross_validator=replay_cross_validator(
            store, as_of_of(autopsy), settings.ledger.initial_cash
        ),
        agent=agent,
        lock=lock,
        holdout=agent.holdout_dir,
        state=RepairState(trail=Trail(run_dir / "trail.jsonl")),
    )


__all__ = [
    "FAILED_STATE_NAMES",
    "STEPS",
    "AttemptRecord",
    "Decision",
    "RepairContext",
    "RepairNotPromoted",
    "RepairOutcome",
    "RepairStepError",
    "admit",
    "as_of_of",
    "changed_tests",
    "complete_autopsy",
    "cross_validation",
    "ending_name",
    "finish",
    "load_autopsy",
    "require_admitted",
    "logic_genesis",
    "open_context",
    "prepare_candidate",
    "run_repair",
    "test_genesis",
]
