"""An endpoint that misbehaves, through the real `openai` client on loopback: a server that drips
its answer is cut off by the request's total deadline and the repair's; a 200 that is no chat
completion is asked again like a bad answer, then ends as InvalidAnswerError with the reply kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from oomrl.agent.budget import Budget
from oomrl.agent.llm import LLMClient, OpenAIBackend, Transcript
from oomrl.errors import InvalidAnswerError, LLMUnavailableError
from tests.agent.fake_openai import FakeOpenAI, Scripted, serve_fake_openai
from tests.agent.repair_helpers import agent_settings
from tests.agent.test_llm import Answer, ok

ASK = [{"role": "user", "content": "x"}]
# Without a total deadline this answer takes minutes: one byte every 50 ms, well inside any read
# timeout.
DRIPPING = Scripted(content=json.dumps({"verdict": "late", "score": 1}), drip_s=0.05, padding=4000)


@pytest.fixture()
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as state:
        yield state


def client_for(server: FakeOpenAI, tmp_path: Path, **overrides: object) -> LLMClient:
    # a generous socket timeout: under a loaded CI machine a 5 s one cut a reply off and added a
    # retry
    settings = agent_settings(**{"timeout_s": 60.0, "retries": 1, "backoff_s": 0.01, **overrides})
    backend = OpenAIBackend(
        server.url, "k", "fake-model", settings.timeout_s, settings.request_deadline_s
    )
    return LLMClient(
        backend,
        Budget.from_settings(settings),
        Transcript(tmp_path / "t.jsonl"),
        settings,
        sleep=lambda seconds: None,
    )


@pytest.mark.slow  # two requests cut off at their deadline
def test_a_dripping_server_is_cut_off_by_the_request_deadline(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.queue(DRIPPING, DRIPPING)
    client = client_for(server, tmp_path, request_deadline_s=1.0)
    with pytest.raises(
        LLMUnavailableError,
        match=r"critic: endpoint failed 2 times, last: RequestDeadlineError: "
        r"no complete answer within 1 s \(OOMRL_AGENT_REQUEST_DEADLINE_S\)",
    ):
        client.ask_json("critic", ASK, Answer)
    # Nothing answered, nothing charged
    assert len(server.requests) == 2 and client.budget.calls == 0


@pytest.mark.slow
def test_a_repair_stops_asking_when_its_model_time_is_spent(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.queue(*[DRIPPING] * 10)
    client = client_for(
        server, tmp_path, request_deadline_s=1.0, repair_llm_deadline_s=1.5, retries=9
    )
    with pytest.raises(
        LLMUnavailableError,
        match=r"critic: this repair has waited 1\.\d s for model answers, "
        r"all of OOMRL_AGENT_REPAIR_LLM_DEADLINE_S=1.5",
    ) as failed:
        client.ask_json("critic", ASK, Answer)
    assert not failed.value.transient  # final: another retry would only wait longer
    tried = [r["kind"] for r in client.transcript.records()]
    assert tried == [
        "request",
        "error",
        "error",
    ]  # the request deadline, then the rest of the repair's
    with pytest.raises(LLMUnavailableError, match="all of OOMRL_AGENT_REPAIR_LLM_DEADLINE_S"):
        client.ask_json("coder", ASK, Answer)  # the next role finds the time spent: nothing is sent
    assert [r["kind"] for r in client.transcript.records()] == tried and client.budget.calls == 0


MALFORMED = [
    (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess',
        "not a chat completion",
    ),
    (
        b'{"id": "x", "choices": "nope", "created": 1, "model": "m", "object": "chat.completion"}',
        "choices: Input should be a valid array",
    ),
    (
        b'{"id": "x", "choices": [], "created": 1, "model": "m", "object": "chat.completion"}',
        "without choices",
    ),
    (
        b'{"id": "x", "choices": [{"index": 0, "finish_reason": "stop", "message": null}], '
        b'"created": 1, '
        b'"model": "m", "object": "chat.completion"}',
        "choices.0.message",
    ),
    (b"<html>502 Bad Gateway</html>", "not a chat completion"),
]


@pytest.mark.parametrize(("body", "reason"), MALFORMED)
def test_a_reply_that_is_no_chat_completion_is_asked_again_then_invalid(
    server: FakeOpenAI, tmp_path: Path, body: bytes, reason: str
) -> None:
    server.queue(Scripted(body=body), Scripted(body=body))
    client = client_for(server, tmp_path)
    with pytest.raises(
        InvalidAnswerError, match="critic: the endpoint's reply was not a chat completion twice"
    ) as invalid:
        client.ask_json("critic", ASK, Answer)
    assert reason in str(invalid.value) and str(tmp_path / "t.jsonl") in str(invalid.value)
    kept = [r for r in client.transcript.records() if r["kind"] == "malformed"]
    assert [r["reply"] for r in kept] == [body.decode()] * 2  # the reply, whole, in the run folder
    assert client.budget.calls == 2 and client.budget.tokens_spent > 0  # sent and billed: charged


def test_one_malformed_reply_then_a_good_one_is_an_answer(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.queue(Scripted(body=MALFORMED[0][0]), ok({"verdict": "fine", "score": 4}))
    client = client_for(server, tmp_path)
    assert client.ask_json("critic", ASK, Answer).score == 4
    assert [r["kind"] for r in client.transcript.records()] == [
        "request",
        "malformed",
        "request",
        "response",
    ]
