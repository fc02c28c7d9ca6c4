"""The agent's roles, each with its own view and prompt: Critic, Test Author, Coder.

The Critic writes the mandate, the Test Author the tests, the Coder the source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, Field, field_serializer

from guardrails.static import NODE_ID
from oomrl.agent.llm import LLMClient
from oomrl.diagnostics.autopsy import Autopsy, LossAlert, PendingAlert, input_json
from oomrl.diagnostics.mandate import Constraints

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
ROLES = ("critic", "test_author", "coder")


TEST_NODE_ID = f"^{NODE_ID}$"  # as the gate's --supersedes takes it


class Mandate(BaseModel):
    """What the repair must achieve, for which strategy module. A person approves or edits it.

    `supersedes` names the old tests the mandate makes obsolete: they pin what it forbids. The gate
    judges a changed one as a red test. It judges every old test it does not name by the weakening
    rule."""

    module: str = Field(pattern=r"^strategies\.[a-z_][a-z0-9_]*$")
    text: str = Field(min_length=1)
    constraints: Constraints
    rationale: str = ""
    alert_id: str | None = None
    supersedes: list[Annotated[str, Field(pattern=TEST_NODE_ID)]] = Field(
        default_factory=list,
        description="node ids of the old tests this mandate makes obsolete "
        "(tests/path/test_file.py::test_name), with the reason in "
        "`rationale`",
    )

    @property
    def strategy(self) -> str:
        return self.module.split(".", 1)[1]


class Patch(BaseModel):
    """A role's answer: one unified diff against the workspace, and a note on what it does."""

    diff: str
    notes: str = ""


class MissedCheck(BaseModel):
    """A cross-validation check the accepted tests let through, for the next round's Test
    Author."""

    check: str
    detail: str = ""
    window: str = ""  # the replayed sessions, start..end


class CriticView(BaseModel):
    """What the Critic sees: the autopsy, its metrics, evidence from the ledger.

    Also the version's S and T read-only, to name the old tests the mandate makes obsolete."""

    autopsy: Autopsy | PendingAlert | LossAlert
    metrics: dict[str, Any] = Field(default_factory=dict)
    evidence: dict[str, Any] = Field(default_factory=dict)
    source: dict[str, str] = Field(default_factory=dict)
    tests: dict[str, str] = Field(default_factory=dict)

    @field_serializer("autopsy")
    def _autopsy_json(self, autopsy: Autopsy | LossAlert) -> dict[str, Any]:
        return input_json(autopsy)  # what the model reads is the JSON the door admitted


class TestAuthorView(BaseModel):
    """What the Test Author sees: the mandate, the autopsy's evidence, S read-only, T, its own
    verdicts. After a failed replay, also what the tests missed and its own tests of earlier
    rounds. Never the Coder's plan or output."""

    __test__ = False  # a name starting with "Test" is not a pytest test class

    mandate: Mandate
    evidence: dict[str, Any] = Field(default_factory=dict)
    source: dict[str, str]
    tests: dict[str, str]
    feedback: list[dict[str, Any]] = Field(default_factory=list)
    missed: list[MissedCheck] = Field(default_factory=list)
    earlier_tests: list[str] = Field(default_factory=list)


class CoderView(BaseModel):
    """What the Coder sees: the mandate, the evidence, T read-only, S, the failing tests.

    Also the verdicts on its own patches (gate and cross-validation). Never the held-out tests."""

    mandate: Mandate
    evidence: dict[str, Any] = Field(default_factory=dict)
    tests: dict[str, str]
    source: dict[str, str]
    failing_tests: list[str] = Field(default_factory=list)
    last_verdict: dict[str, Any] | None = None
    feedback: list[dict[str, Any]] = Field(default_factory=list)


class Provider(Protocol):
    """Answers for the three roles; the Judge is never a provider, it is the gate."""

    name: str

    def critic(self, view: CriticView) -> Mandate: ...

    def test_author(self, view: TestAuthorView) -> Patch: ...

    def coder(self, view: CoderView) -> Patch: ...

    def answer_key(self, role: str, view: BaseModel) -> str | None:
        """For a deterministic provider, a digest of what its answer depends on; None otherwise."""
        ...


def read_tree(workspace: Path, top: str) -> dict[str, str]:
    """Every Python file under workspace/top, by workspace-relative POSIX path."""
    root = workspace / top
    return {
        p.relative_to(workspace).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def prompt_text(role: str) -> str:
    """The system prompt of a role, from oomrl/agent/prompts/<role>.md."""
    return (PROMPTS_DIR / f"{role}.md").read_text(encoding="utf-8")


class LLMProvider:
    """Roles answered by a chat model (a live endpoint or a replayed transcript) through
    LLMClient."""

    def __init__(self, client: LLMClient, name: str = "openai") -> None:
        self.client = client
        self.name = name

    def _messages(
        self, role: str, view: BaseModel, answer: type[BaseModel]
    ) -> list[dict[str, str]]:
        schema = json.dumps(answer.model_json_schema())
        return [
            {"role": "system", "content": prompt_text(role) + f"\n\nAnswer JSON Schema:\n{schema}"},
            {"role": "user", "content": view.model_dump_json(indent=1)},
        ]

    def critic(self, view: CriticView) -> Mandate:
        return self.client.ask_json("critic", self._messages("critic", view, Mandate), Mandate)

    def test_author(self, view: TestAuthorView) -> Patch:
        return self.client.ask_json(
            "test_author", self._messages("test_author", view, Patch), Patch
        )

    def coder(self, view: CoderView) -> Patch:
        return self.client.ask_json("coder", self._messages("coder", view, Patch), Patch)

    def answer_key(self, role: str, view: BaseModel) -> str | None:
        """A model may answer differently when asked again: no key, every retry is worth asking."""
        return None
