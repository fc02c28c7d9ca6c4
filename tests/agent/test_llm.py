"""The LLM client against a real loopback OpenAI-compatible server: retries, timeouts, JSON repair,
budget."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from oomrl.agent.budget import Budget
from oomrl.agent.llm import LLMClient, OpenAIBackend, Transcript, parse_json_answer
from oomrl.errors import InvalidAnswerError, LLMUnavailableError, OutOfMoneyError
from tests.agent.fake_openai import FakeOpenAI, Scripted, serve_fake_openai
from tests.agent.repair_helpers import agent_settings


class Answer(BaseModel):
    verdict: str
    score: int


@pytest.fixture()
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as state:
        yield state


def make_client(
    server: FakeOpenAI, tmp_path: Path, budget: Budget | None = None, **overrides: object
) -> tuple[LLMClient, list[float]]:
    settings = agent_settings(**{"timeout_s": 5.0, "retries": 2, "backoff_s": 0.01, **overrides})
    sleeps: list[float] = []
    client = LLMClient(
        OpenAIBackend(
            server.url, "k", "fake-model", settings.timeout_s, settings.request_deadline_s
        ),
        budget or Budget.from_settings(settings),
        Transcript(tmp_path / "t.jsonl"),
        settings,
        sleep=sleeps.append,
    )
    return client, sleeps


def ok(payload: dict[str, object], **kw: object) -> Scripted:
    return Scripted(content=json.dumps(payload), **kw)  # type: ignore[arg-type]


def test_json_answer_is_parsed_charged_and_logged(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(ok({"verdict": "fine", "score": 3}, prompt_tokens=1000, completion_tokens=500))
    client, sleeps = make_client(server, tmp_path)
    answer = client.ask_json("critic", [{"role": "user", "content": "hi"}], Answer)
    assert answer == Answer(verdict="fine", score=3)
    assert client.budget.tokens_spent == 1500
    assert client.budget.cost_spent_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert server.requests[0]["model"] == "fake-model"
    kinds = [r["kind"] for r in client.transcript.records()]
    assert kinds == ["request", "response"] and sleeps == []
    assert len(client.transcript.digest()) == 64


def test_429_then_success_is_retried_with_backoff(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(
        Scripted(status=429, content="slow down", headers={"retry-after": "0.05"}),
        ok({"verdict": "ok", "score": 1}),
    )
    client, sleeps = make_client(server, tmp_path)
    assert client.ask_json("coder", [{"role": "user", "content": "x"}], Answer).score == 1
    assert len(server.requests) == 2 and len(sleeps) == 1 and sleeps[0] >= 0.05
    errors = [r for r in client.transcript.records() if r["kind"] == "error"]
    assert errors[0]["transient"] is True and "RateLimitError" in errors[0]["error"]


def test_persistent_500s_exhaust_retries(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(*[Scripted(status=503, content="down")] * 3)
    client, sleeps = make_client(server, tmp_path)
    with pytest.raises(LLMUnavailableError, match="failed 3 times"):
        client.ask("coder", [{"role": "user", "content": "x"}])
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert sleeps[1] > sleeps[0]  # exponential backoff
    assert client.budget.tokens_spent == 0


def test_client_errors_are_not_retried(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(Scripted(status=400, content="bad request"), ok({"verdict": "x", "score": 0}))
    client, sleeps = make_client(server, tmp_path)
    with pytest.raises(LLMUnavailableError, match="refused"):
        client.ask("coder", [{"role": "user", "content": "x"}])
    assert len(server.requests) == 1 and sleeps == []


@pytest.mark.slow
def test_slow_response_times_out_then_recovers(server: FakeOpenAI, tmp_path: Path) -> None:
    # The late reply never comes in time; the timeout is long enough for a prompt reply on a loaded
    # machine.
    server.queue(Scripted(content="late", hang=True), ok({"verdict": "on time", "score": 2}))
    client, sleeps = make_client(server, tmp_path, timeout_s=2.0)
    assert (
        client.ask_json("critic", [{"role": "user", "content": "x"}], Answer).verdict == "on time"
    )
    errors = [r for r in client.transcript.records() if r["kind"] == "error"]
    assert "Timeout" in errors[0]["error"] and len(sleeps) == 1


@pytest.mark.slow
def test_always_slow_endpoint_fails_cleanly(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(*[Scripted(content="late", hang=True)] * 2)
    client, _ = make_client(server, tmp_path, timeout_s=0.2, retries=1)
    with pytest.raises(LLMUnavailableError, match="APITimeoutError"):
        client.ask("critic", [{"role": "user", "content": "x"}])
    assert client.budget.calls == 0


def test_invalid_json_gets_one_repair_round_trip(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(Scripted(content="Sure! verdict is fine"), ok({"verdict": "fine", "score": 9}))
    client, _ = make_client(server, tmp_path)
    assert client.ask_json("critic", [{"role": "user", "content": "x"}], Answer).score == 9
    repair_prompt = server.requests[1]["messages"][-1]["content"]
    assert "not valid" in repair_prompt and '"score"' in repair_prompt
    assert server.requests[1]["messages"][-2] == {
        "role": "assistant",
        "content": "Sure! verdict is fine",
    }


def test_invalid_json_twice_is_an_invalid_answer(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(Scripted(content="nope"), ok({"verdict": "missing score"}))
    client, _ = make_client(server, tmp_path)
    with pytest.raises(InvalidAnswerError, match="score"):
        client.ask_json("critic", [{"role": "user", "content": "x"}], Answer)
    assert len(server.requests) == 2
    assert [r["kind"] for r in client.transcript.records()].count("invalid") == 2


def test_oversized_answer_is_refused_but_paid_for(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(Scripted(content="x" * 5000))
    client, _ = make_client(server, tmp_path, max_answer_chars=1000)
    with pytest.raises(InvalidAnswerError, match="5000 characters exceeds the limit of 1000"):
        client.ask("coder", [{"role": "user", "content": "x"}])
    assert client.budget.tokens_spent == 150


def test_each_call_asks_only_for_what_is_left_and_none_is_sent_unaffordable(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.queue(*[ok({"verdict": "a", "score": 1}, prompt_tokens=100, completion_tokens=500)] * 3)
    budget = Budget(
        max_tokens=1500, max_cost_usd=1.0, price_prompt_per_mtok=1.0, price_completion_per_mtok=1.0
    )
    client, _ = make_client(
        server, tmp_path, budget=budget, max_output_tokens=1000, min_output_tokens=400
    )
    bound = 1 + 8 * 2  # one byte of prompt, two messages' worth of chat format
    client.ask("critic", [{"role": "user", "content": "1"}])
    client.ask("critic", [{"role": "user", "content": "2"}])
    assert [r["max_tokens"] for r in server.requests] == [1000, 1500 - 600 - bound]
    with pytest.raises(
        OutOfMoneyError,
        match=r"cannot afford the next step \(critic: a prompt of "
        r"up to 17 tokens and an answer of at least 400; left: 300",
    ):
        client.ask("critic", [{"role": "user", "content": "3"}])
    assert len(server.requests) == 2 and budget.tokens_spent == 1200
    assert [
        r["reserved_tokens"] for r in client.transcript.records() if r["kind"] == "request"
    ] == [1000 + bound, 900]


def test_a_server_billing_past_the_reservation_ends_the_repair(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.queue(ok({"verdict": "a", "score": 1}, prompt_tokens=100, completion_tokens=2000))
    budget = Budget(
        max_tokens=1500, max_cost_usd=1.0, price_prompt_per_mtok=1.0, price_completion_per_mtok=1.0
    )
    client, _ = make_client(
        server, tmp_path, budget=budget, max_output_tokens=1000, min_output_tokens=400
    )
    with pytest.raises(OutOfMoneyError, match="budget exceeded .*tokens 2100/1500"):
        client.ask("critic", [{"role": "user", "content": "1"}])
    assert server.requests[0]["max_tokens"] == 1000  # the server billed past what it was allowed


def test_the_money_left_bounds_the_answer_too(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(ok({"verdict": "a", "score": 1}, prompt_tokens=10, completion_tokens=10))
    budget = Budget(
        max_tokens=10_000_000,
        max_cost_usd=0.003,
        price_prompt_per_mtok=0.0,
        price_completion_per_mtok=1.0,
    )
    client, _ = make_client(server, tmp_path, budget=budget)
    client.ask("critic", [{"role": "user", "content": "1"}])
    assert server.requests[0]["max_tokens"] == 3000  # $0.003 buys 3000 answer tokens


def test_money_limit_is_enforced_too(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(ok({"verdict": "a", "score": 1}, prompt_tokens=1_000_000, completion_tokens=0))
    budget = Budget(
        max_tokens=10_000_000,
        max_cost_usd=0.10,
        price_prompt_per_mtok=0.15,
        price_completion_per_mtok=0.6,
    )
    client, _ = make_client(server, tmp_path, budget=budget)
    with pytest.raises(OutOfMoneyError, match=r"\$0.1500/\$0.1000"):
        client.ask("critic", [{"role": "user", "content": "1"}])


def test_fenced_json_is_accepted() -> None:
    assert parse_json_answer('```json\n{"verdict": "v", "score": 1}\n```', Answer).score == 1


def test_transcript_of_nothing_and_a_garbled_retry_after(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    assert Transcript(tmp_path / "none.jsonl").records() == []
    server.queue(
        Scripted(status=429, headers={"retry-after": "soon"}), ok({"verdict": "v", "score": 1})
    )
    client, sleeps = make_client(server, tmp_path)
    assert client.ask("critic", [{"role": "user", "content": "x"}])
    assert 0.01 <= sleeps[0] < 1.0  # our own backoff, since the hint was unreadable


def test_a_server_without_usage_is_charged_an_estimate(server: FakeOpenAI, tmp_path: Path) -> None:
    server.queue(Scripted(content="y" * 400, with_usage=False))
    client, _ = make_client(server, tmp_path)
    client.ask("coder", [{"role": "user", "content": "x" * 800}])
    assert client.budget.tokens_spent == (800 // 4 + 1) + (400 // 4 + 1)


def test_json_mode_can_be_switched_off_for_servers_that_refuse_it(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.queue(ok({"verdict": "plain", "score": 4}))
    client, _ = make_client(server, tmp_path, json_mode=False)
    assert client.ask_json("critic", [{"role": "user", "content": "x"}], Answer).score == 4
    assert "response_format" not in server.requests[0]
