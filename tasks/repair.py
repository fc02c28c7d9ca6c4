"""Prefect tasks of the repair: each domain step, and its artifacts.

Each step retries for transient errors only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_image_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State
from prefect.tasks import Task, exponential_backoff

from oomrl.artifacts import image_link
from oomrl.errors import LLMUnavailableError
from oomrl.repair import loop as domain
from oomrl.repair.artifacts import not_measured_rows
from oomrl.repair.crossval import crossval_markdown, crossval_rows
from oomrl.report_links import ReportLinks

STEP_RETRIES = 2
BACKOFF_SECONDS = 5.0


def transient_only(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry when the model endpoint was down after the client's own retries; nothing else
    repeats."""
    try:
        state.result()
    except LLMUnavailableError as exc:
        return exc.transient
    except Exception:  # noqa: BLE001 - gate rejections, budget, bad answers: final
        return False
    return False


def _step_task(name: str) -> Task[..., Any]:
    """A task that runs one domain step.

    The context is in-process state, so nothing is cached.
    """

    @task(
        name=f"repair-{name}",
        retries=STEP_RETRIES,
        retry_condition_fn=transient_only,
        retry_delay_seconds=exponential_backoff(BACKOFF_SECONDS),
        cache_policy=NO_CACHE,
        persist_result=False,
    )
    def run(function: Any, *args: Any) -> Any:
        return function(*args)

    return run


STEP_TASKS: dict[str, Task[..., Any]] = {name: _step_task(name) for name in domain.STEPS}


def run_step_as_task(step: str, function: Any, *args: Any) -> Any:
    """The StepRunner the flow gives run_repair: each step becomes its own task run."""
    return STEP_TASKS[step](function, *args)


def _code(text: str, language: str = "") -> str:
    return f"```{language}\n{text.strip()}\n```"


def publish_autopsy(autopsy: dict[str, Any]) -> None:
    """The autopsy that started the repair, as a markdown artifact."""
    create_markdown_artifact(
        key="repair-autopsy",
        description="The loss autopsy",
        markdown="# Autopsy\n\n" + _code(json.dumps(autopsy, indent=1, default=str), "json"),
    )


def publish_outcome(outcome: domain.RepairOutcome) -> None:
    """Every diff and verdict, the cross-validation table, and the outcome."""
    for record in outcome.attempts:
        verdict = json.dumps(record.verdict.model_dump(mode="json"), indent=1, default=str)
        create_markdown_artifact(
            key=f"repair-{record.phase}-{record.attempt}",
            description=f"{record.phase} attempt {record.attempt}: "
            f"{'accepted' if record.accepted else 'rejected'}",
            markdown=(
                f"# {record.phase}, attempt {record.attempt}\n\n{record.notes}\n\n## Diff\n\n"
                f"{_code(record.diff or '(no diff)', 'diff')}\n\n## Verdict\n\n"
                f"{_code(verdict, 'json')}"
            ),
        )
    publish_evidence(outcome)
    lines = [
        f"# Repair {outcome.status}",
        "",
        f"- step: {outcome.step or '-'}",
        f"- reason: {outcome.reason}",
        f"- run folder: `{outcome.run_dir}`",
        f"- budget: {json.dumps(outcome.budget)}",
    ]
    if outcome.mandate is not None:
        lines.append(
            f"- mandate: {outcome.mandate.text} "
            f"`{outcome.mandate.constraints.model_dump_json(exclude_none=True)}`"
        )
    if outcome.version is not None:
        lines.append(f"- version: {outcome.version.tag} `{outcome.version.sha}`")
    create_markdown_artifact(
        key="repair-outcome", markdown="\n".join(lines), description=f"repair {outcome.status}"
    )
    publish_agent_records(outcome)


def publish_evidence(outcome: domain.RepairOutcome) -> None:
    """The cross-validation artifacts.

    The table is versions × windows. The decision comes with the evidence chart. The chart also
    goes as an image. A cross-validation that could not be measured still gets its table, saying
    why.
    """
    cross = outcome.cross_validation
    if cross is None:
        if outcome.step == "cross-validation":
            create_table_artifact(
                key="repair-cross-validation",
                table=not_measured_rows(outcome.reason),
                description=f"cross-validation not measured: {outcome.reason}"[:500],
            )
        return
    image = None
    if outcome.run_dir and any(row.dates for row in cross.rows):
        # matplotlib is imported only when there is a chart to draw
        from oomrl.repair.evidence import evidence_chart

        chart = evidence_chart(cross, evidence_dir(Path(outcome.run_dir)) / "evidence.png")
        image = image_link(chart, ReportLinks.from_env())
        create_image_artifact(
            image,
            key="repair-evidence",
            description="Cumulative return net of friction of each version over the long "
            "window, the alert window shaded",
        )
    verdict = "passed" if cross.passed else "; ".join(cross.failures())
    create_table_artifact(
        key="repair-cross-validation",
        table=crossval_rows(cross),
        description=f"alert window {cross.start}..{cross.end}: {verdict}"[:500],
    )
    create_markdown_artifact(
        key="repair-cross-validation-decision",
        markdown=crossval_markdown(cross, image),
        description="promotion evidence: measures per version and window, checks, tolerance",
    )


def evidence_dir(run_dir: Path) -> Path:
    """runs/report-<repair folder>/: where the evidence chart goes, so the webhook's report route
    serves it."""
    from oomrl.files import private_dir

    return private_dir(run_dir.parent / f"report-{run_dir.name}")


def publish_agent_records(outcome: domain.RepairOutcome) -> None:
    """The transcript, the budget (this repair and the account's ledger balance) and the state
    trail."""
    from oomrl.agent.records import budget_rows, trail_markdown, transcript_rows

    if outcome.run_dir:
        create_table_artifact(
            key="repair-transcript",
            table=transcript_rows(outcome.run_dir),
            description=f"Every model request and answer ({outcome.run_dir}/transcript.jsonl)",
        )
    if outcome.budget:
        create_table_artifact(
            key="repair-budget",
            table=budget_rows(outcome.budget),
            description="LLM budget: this repair and the account (ledger)",
        )
    if outcome.trail:
        create_markdown_artifact(
            key="repair-trail",
            markdown=trail_markdown(outcome.trail),
            description="The repair's state machine transitions",
        )
