"""Providers of role answers: `openai` (a live endpoint), `offline` (deterministic rules), `replay`
(a transcript)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from oomrl.agent.budget import Budget, Usage
from oomrl.agent.llm import ChatReply, LLMClient, Messages, OpenAIBackend, Transcript
from oomrl.agent.offline_author import (
    mandate_tests,
    missed_tests,
    pinned_tests,
    supersede,
    superseded_by_file,
)
from oomrl.agent.offline_coder import reference_change
from oomrl.agent.offline_common import unified_diff
from oomrl.agent.roles import (
    CoderView,
    CriticView,
    LLMProvider,
    Mandate,
    Patch,
    Provider,
    TestAuthorView,
)
from oomrl.diagnostics.autopsy import Autopsy, LossAlert, PendingAlert
from oomrl.diagnostics.mandate import Constraints
from oomrl.errors import ProviderError
from oomrl.settings import AgentSettings, OomrlSettings

PROVIDERS = ("offline", "openai", "replay")

# The offline Critic's table: alert type -> (mandate text, constraints). Evidence in the autopsy
# wins.
ALERT_MANDATES: dict[str, tuple[str, dict[str, Any]]] = {
    "execution_decay": (
        "Enforce volume limits and reduce turnover frequency",
        {"rebalance": "weekly", "max_adv_participation": 0.05, "max_weekly_turnover": 0.3},
    ),
    "turnover_spike": (
        "Reduce turnover: rebalance weekly within a turnover budget",
        {"rebalance": "weekly", "max_adv_participation": 0.05, "max_weekly_turnover": 0.3},
    ),
    "loss": (
        "Cut the cost drag: trade weekly, cap ADV participation and weekly turnover",
        {"rebalance": "weekly", "max_adv_participation": 0.05, "max_weekly_turnover": 0.3},
    ),
}
ALERT_ALIASES = {
    "slippage": "execution_decay",
    "execution": "execution_decay",
    "turnover": "turnover_spike",
}


def alert_type(autopsy: Autopsy | LossAlert) -> str:
    """The kind of alert an autopsy reports, from its rule name, else from its metrics.

    A loss alert has neither: a loss."""
    if not isinstance(autopsy, Autopsy):
        return "loss"
    rule = autopsy.trigger.rule
    for key in ALERT_MANDATES:
        if key in rule:
            return key
    for alias, key in ALERT_ALIASES.items():
        if alias in rule:
            return key
    if autopsy.metrics.slippage_leakage > 0.005:
        return "execution_decay"
    if autopsy.metrics.turnover_annualized > 20.0:
        return "turnover_spike"
    return "loss"


class OfflineProvider:
    """Deterministic rules standing in for a model (no network, no key); honest about being rules.

    Each answer is logged to the transcript like a model's, so `replay` can reproduce an offline
    run. Each is booked in the budget at no cost. The rules of each role read only that role's
    view."""

    name = "offline"
    MODEL = "offline-rules"
    # What the rules of each role read. A view that differs elsewhere (e.g. in feedback, which
    # rules do not read) gets the same answer. So asking again is pointless.
    READS: ClassVar[dict[str, set[str]]] = {
        "critic": {"autopsy", "source", "tests"},
        "test_author": {"mandate", "source", "tests", "missed"},
        "coder": {"mandate", "source", "tests"},
    }

    def __init__(self, transcript: Transcript | None = None, budget: Budget | None = None) -> None:
        self.transcript = transcript
        self.budget = budget

    def _log(self, role: str, view: BaseModel, answer: BaseModel) -> None:
        if self.budget is not None:
            self.budget.record_free(role, self.MODEL)
        if self.transcript is not None:
            self.transcript.append("request", role, view=view.model_dump(mode="json"))
            self.transcript.append(
                "response",
                role,
                content=answer.model_dump_json(),
                usage={"prompt_tokens": 0, "completion_tokens": 0},
                model=self.MODEL,
            )

    def answer_key(self, role: str, view: BaseModel) -> str | None:
        """Rules are a function of what they read: a digest of exactly that."""
        read = view.model_dump(mode="json", include=self.READS[role])
        return hashlib.sha256(json.dumps(read, sort_keys=True).encode()).hexdigest()

    def critic(self, view: CriticView) -> Mandate:
        """Map the alert type to a mandate; constraints the autopsy already derived take
        precedence."""
        mandate = self._critic(view)
        self._log("critic", view, mandate)
        return mandate

    def test_author(self, view: TestAuthorView) -> Patch:
        patch = self._test_author(view)
        self._log("test_author", view, patch)
        return patch

    def coder(self, view: CoderView) -> Patch:
        patch = self._coder(view)
        self._log("coder", view, patch)
        return patch

    def _critic(self, view: CriticView) -> Mandate:
        autopsy = view.autopsy
        kind = alert_type(autopsy)
        text, constraints = ALERT_MANDATES[kind]
        full = autopsy if isinstance(autopsy, Autopsy) else None
        given = full.constraints.model_dump(exclude_none=True) if full else {}
        module = (
            full.diagnostics.module
            if full
            else autopsy.diagnostics.module
            if isinstance(autopsy, PendingAlert)
            else "strategies.daily_momentum"
        )
        metrics = full.metrics.model_dump(mode="json") if full else {}
        mandate = Mandate(
            module=module,
            text=full.mandate if full else text,
            constraints=Constraints.model_validate({**constraints, **given}),
            alert_id=autopsy.alert_id,
            rationale=f"offline rules: alert type {kind!r}; "
            f"metrics {json.dumps(metrics, sort_keys=True)}",
        )
        # The old tests that watch today's strategy break the mandate pin what it forbids.
        module_path = module.replace(".", "/") + ".py"
        pinned = (
            pinned_tests(view.source, view.tests, mandate) if module_path in view.source else {}
        )
        if not pinned:
            return mandate
        reasons = "; ".join(
            f"{node_id}: {reason or 'breaks a constraint'}" for node_id, reason in pinned.items()
        )
        return mandate.model_copy(
            update={
                "supersedes": list(pinned),
                "rationale": f"{mandate.rationale}; supersedes the old tests that watch today's "
                f"strategy break the mandate ({reasons})",
            }
        )

    def _test_author(self, view: TestAuthorView) -> Patch:
        """Tests for the whole mandate, and new bodies for the old tests it supersedes.

        The mandate is the approved one. After a failed replay, also tests for what the replay
        found."""
        mandate = view.mandate
        extra = ""
        if view.missed:
            checks = ", ".join(m.check for m in view.missed)
            text = missed_tests(mandate, view.missed)
            if text is None:
                return Patch(
                    diff="",
                    notes=f"offline rules have no test for what cross-validation "
                    f"found missing ({checks})",
                )
            missed_path = _new_test_path(view.tests, mandate.strategy, "missed")
            extra = unified_diff(missed_path, None, text)
        target = _new_test_path(view.tests, mandate.strategy)
        diffs = [unified_diff(target, None, mandate_tests(mandate))]
        superseded = superseded_by_file(mandate)
        for path, names in sorted(superseded.items()):
            if path in view.tests:
                diffs.append(
                    unified_diff(
                        path, view.tests[path], supersede(view.tests[path], names, mandate)
                    )
                )
        notes = (
            "offline rules: tests for constraints "
            f"{mandate.constraints.model_dump(exclude_none=True)}"
            f" in {target}; superseded {sum(len(n) for n in superseded.values())} old tests the "
            "approved mandate names"
            + ("; tests for what the replay found missing" if extra else "")
        )
        return Patch(diff="".join(diffs) + extra, notes=notes)

    def _coder(self, view: CoderView) -> Patch:
        """The mandate's reference change to the strategy module, as a diff."""
        module_path = view.mandate.module.replace(".", "/") + ".py"
        if module_path not in view.source:
            raise ProviderError(f"offline coder: {module_path} is not in the workspace")
        old = view.source[module_path]
        return Patch(
            diff=unified_diff(module_path, old, reference_change(old, view.mandate)),
            notes="offline rules: constraint params, schedule, ADV-capped and "
            "turnover-budgeted trading toward the old targets",
        )


def _new_test_path(tests: dict[str, str], strategy: str, kind: str = "mandate") -> str:
    """tests/strategies/test_<strategy>_<kind>[_n].py, the first name not taken."""
    base = f"tests/strategies/test_{strategy}_{kind}"
    n = 1
    while (candidate := f"{base}{'' if n == 1 else f'_{n}'}.py") in tests:
        n += 1
    return candidate


class ReplayBackend:
    """Answers from a recorded transcript, in order, role by role (no network)."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise ProviderError(f"replay transcript {path} does not exist")
        self.replies: dict[str, list[ChatReply]] = {}
        for record in Transcript(path).records():
            if record.get("kind") == "response":
                self.replies.setdefault(record["role"], []).append(
                    ChatReply(
                        content=record.get("content", ""),
                        usage=Usage(**record.get("usage", {})),
                        model=record.get("model", "replay"),
                        finish_reason=record.get("finish_reason"),
                    )
                )

    def complete(
        self, role: str, messages: Messages, max_tokens: int, json_mode: bool
    ) -> ChatReply:
        queue = self.replies.get(role) or []
        if not queue:
            raise ProviderError(f"replay transcript has no more {role} responses")
        return queue.pop(0)


def get_provider(
    name: str | None,
    settings: OomrlSettings,
    budget: Budget,
    transcript: Transcript,
    agent_settings: AgentSettings | None = None,
    replay_from: Path | None = None,
) -> Provider:
    """The provider by name (default: the agent group's llm_provider_name)."""
    chosen = name or settings.agent.llm_provider_name
    agent = agent_settings or settings.agent
    if chosen == "offline":
        return OfflineProvider(transcript, budget)
    if chosen == "openai":
        backend = OpenAIBackend(
            settings.agent.llm_base_url,
            settings.agent.llm_api_key,
            settings.agent.llm_model,
            agent.timeout_s,
            agent.request_deadline_s,
        )
        return LLMProvider(LLMClient(backend, budget, transcript, agent), "openai")
    if chosen == "replay":
        if replay_from is None:
            raise ProviderError("the replay provider needs a transcript (--transcript FILE)")
        return LLMProvider(
            LLMClient(ReplayBackend(replay_from), budget, transcript, agent), "replay"
        )
    raise ProviderError(f"unknown provider {chosen!r}; choose one of {', '.join(PROVIDERS)}")
