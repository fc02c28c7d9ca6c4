"""One chat-completions client for every OpenAI-compatible server: retries, budget, JSON answers,
transcript."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import openai
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

from oomrl.agent.budget import Budget, Usage, prompt_token_bound
from oomrl.agent.deadline import deadline, deadline_client
from oomrl.errors import InvalidAnswerError, LLMUnavailableError, MalformedReplyError
from oomrl.files import private_dir
from oomrl.settings import AgentSettings

Model = TypeVar("Model", bound=BaseModel)
Messages = list[dict[str, str]]

logger = logging.getLogger(__name__)


class RequestDeadlineError(openai.APITimeoutError):
    """One request was not answered whole within its total deadline (retried like any timeout)."""

    def __init__(self, request: Any, seconds: float) -> None:
        super().__init__(request=request)
        self.message = (
            f"no complete answer within {seconds:g} s (OOMRL_AGENT_REQUEST_DEADLINE_S): the "
            "server is too slow or drips its answer"
        )
        self.args = (self.message,)


class ChatReply(BaseModel):
    """One completion: the text, what it cost, and why it stopped."""

    content: str
    usage: Usage = Usage()
    model: str = ""
    finish_reason: str | None = None


class ChatBackend(Protocol):
    """Something that answers a list of chat messages (a server, or a recorded transcript)."""

    def complete(
        self, role: str, messages: Messages, max_tokens: int, json_mode: bool
    ) -> ChatReply: ...


class Transcript:
    """Append-only JSONL log of every request and response of one run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seq = 0

    def append(self, kind: str, role: str, **fields: Any) -> None:
        """Write one record and flush it, so a crash loses nothing already answered."""
        with self._lock:
            self._seq += 1
            record = {
                "seq": self._seq,
                "ts": datetime.now(UTC).isoformat(),
                "kind": kind,
                "role": role,
                **fields,
            }
            private_dir(self.path.parent)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, default=str) + "\n")

    def records(self) -> list[dict[str, Any]]:
        """Every record written so far."""
        if not self.path.exists():
            return []
        return [
            json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line
        ]

    def digest(self) -> str:
        """SHA-256 of the transcript file, recorded with the version it produced."""
        data = self.path.read_bytes() if self.path.exists() else b""
        return hashlib.sha256(data).hexdigest()


class OpenAIBackend:
    """Chat completions over the `openai` SDK against any OpenAI-compatible base URL.

    SDK retries are off. `timeout_s` bounds each socket operation, `deadline_s` the whole request.
    A 200 reply that is not a chat completion is a MalformedReplyError carrying what was sent."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout_s: float,
        deadline_s: float,
    ) -> None:
        # max_retries=0: retry policy is ours (LLMClient), so behaviour is explicit and logged.
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_s,
            max_retries=0,
            http_client=deadline_client(timeout_s),
        )
        self.model = model
        self.deadline_s = deadline_s

    def complete(
        self, role: str, messages: Messages, max_tokens: int, json_mode: bool
    ) -> ChatReply:
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if json_mode else {}
        started = time.monotonic()
        try:
            with deadline(self.deadline_s):
                raw = self.client.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=max_tokens,
                    temperature=0,
                    **extra,
                )
                text = raw.http_response.text
        except openai.APITimeoutError as exc:
            # Not one slow read: the whole request
            if time.monotonic() - started >= self.deadline_s:
                raise RequestDeadlineError(exc.request, self.deadline_s) from exc
            raise
        response = chat_completion(text)
        choice = response.choices[0]
        content = choice.message.content or ""
        usage = response.usage
        if usage is None:  # some servers omit it; charge an estimate, not zero
            spent = estimated_usage(messages, content)
        else:
            spent = Usage(
                prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
            )
        return ChatReply(
            content=content,
            usage=spent,
            model=response.model or self.model,
            finish_reason=choice.finish_reason,
        )


def chat_completion(text: str) -> ChatCompletion:
    """The reply body as a chat completion with at least one choice, checked field by field.

    The SDK builds its objects without checking. So a wrong shape would fail later as a defect."""
    try:
        response = ChatCompletion.model_validate_json(text)
    except ValidationError as exc:
        raise MalformedReplyError(
            f"the reply is not a chat completion: {_short(exc)}", text
        ) from None
    if not response.choices:
        raise MalformedReplyError("the reply is a chat completion without choices", text)
    return response


def estimated_usage(messages: Messages, answer: str) -> Usage:
    """What a call cost when the server does not say (~4 characters a token)."""
    return Usage(
        prompt_tokens=sum(len(m["content"]) for m in messages) // 4 + 1,
        completion_tokens=len(answer) // 4 + 1,
    )


def is_transient(exc: Exception) -> bool:
    """429, 5xx and connection errors (timeouts included) are worth retrying; nothing else is."""
    if isinstance(exc, openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def _retry_after(exc: Exception) -> float | None:
    """The server's Retry-After in seconds, when it sent one."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def parse_json_answer(content: str, model: type[Model]) -> Model:
    """Parse an answer into `model`, tolerating one surrounding Markdown code fence."""
    fenced = _FENCE.match(content)
    return model.model_validate_json(fenced.group(1) if fenced else content)


class LLMClient:
    """Asks a backend, retrying transient failures with backoff, charging the budget, logging the
    transcript."""

    def __init__(
        self,
        backend: ChatBackend,
        budget: Budget,
        transcript: Transcript,
        settings: AgentSettings,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.backend = backend
        self.budget = budget
        self.transcript = transcript
        self.settings = settings
        self.sleep = sleep
        self.seconds_spent = 0.0  # waiting for the endpoint, over every call of this repair

    def ask(
        self, role: str, messages: Messages, json_mode: bool = False, again: bool = False
    ) -> str:
        """One answer's text; raises OutOfMoneyError, LLMUnavailableError or InvalidAnswerError.

        The most the call may cost is reserved first. Nothing is sent if it cannot be afforded.
        What it did cost is debited before the answer is used."""
        self._time_left(role)  # a repair whose model time is spent asks nothing more
        held = self.budget.reserve(
            role,
            prompt_token_bound(messages),
            self.settings.max_output_tokens,
            min(self.settings.min_output_tokens, self.settings.max_output_tokens),
        )
        self.transcript.append(
            "request",
            role,
            messages=messages,
            max_tokens=held.max_tokens,
            reserved_tokens=held.tokens,
        )
        try:
            reply = self._complete_with_retries(role, messages, held.max_tokens, json_mode)
        except MalformedReplyError as exc:
            # An answer that is no answer is charged at an estimate: it was sent and billed. It is
            # kept whole in the run folder's transcript. It is asked once more, like an answer that
            # is not the JSON asked for. Then it is given up as an invalid answer.
            self.transcript.append(
                "malformed", role, error=exc.reason, reply=exc.raw[: self.settings.max_answer_chars]
            )
            self.budget.settle(held, estimated_usage(messages, exc.raw), "")
            if again:
                raise InvalidAnswerError(
                    f"{role}: the endpoint's reply was not a chat completion twice "
                    f"({exc.reason}); the reply is kept in {self.transcript.path}"
                ) from None
            return self.ask(role, messages, json_mode, again=True)
        except BaseException as exc:
            self.budget.release(held, f"{type(exc).__name__}: {exc}")
            raise
        self.transcript.append(
            "response",
            role,
            content=reply.content,
            usage=reply.usage.model_dump(),
            model=reply.model,
            finish_reason=reply.finish_reason,
        )
        # May raise: the answer is logged, not used
        self.budget.settle(held, reply.usage, reply.model)
        if len(reply.content) > self.settings.max_answer_chars:
            raise InvalidAnswerError(
                f"{role}: answer of {len(reply.content)} characters exceeds "
                f"the limit of {self.settings.max_answer_chars}"
            )
        return reply.content

    def ask_json(self, role: str, messages: Messages, model: type[Model]) -> Model:
        """An answer parsed into `model`.

        One repair round-trip follows when it is not valid JSON for it."""
        content = self.ask(role, messages, json_mode=self.settings.json_mode)
        try:
            return parse_json_answer(content, model)
        except ValidationError as first:
            self.transcript.append("invalid", role, error=_short(first))
            repair = messages + [
                {"role": "assistant", "content": content},
                {
                    "role": "user",
                    "content": (
                        f"Your reply was not valid: {_short(first)}\nReply again with only "
                        "one JSON "
                        "object matching this JSON "
                        f"Schema:\n{json.dumps(model.model_json_schema())}"
                    ),
                },
            ]
            second = self.ask(role, repair, json_mode=self.settings.json_mode)
            try:
                return parse_json_answer(second, model)
            except ValidationError as again:
                self.transcript.append("invalid", role, error=_short(again))
                raise InvalidAnswerError(
                    f"{role}: answer still not valid {model.__name__} JSON after one repair: "
                    f"{_short(again)}"
                ) from again

    def _time_left(self, role: str, running_s: float = 0.0) -> float:
        """What is left of the repair's model time (`running_s`: of a call not counted yet).

        LLMUnavailableError, final, once it is spent."""
        spent = self.seconds_spent + running_s
        left = self.settings.repair_llm_deadline_s - spent
        if left <= 0:
            raise LLMUnavailableError(
                f"{role}: this repair has waited {spent:.1f} s for model answers, all of "
                f"OOMRL_AGENT_REPAIR_LLM_DEADLINE_S={self.settings.repair_llm_deadline_s:g}"
            )
        return left

    def _complete_with_retries(
        self, role: str, messages: Messages, max_tokens: int, json_mode: bool
    ) -> ChatReply:
        attempts = self.settings.retries + 1
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                with deadline(self._time_left(role)):
                    return self.backend.complete(role, messages, max_tokens, json_mode)
            except (LLMUnavailableError, MalformedReplyError):
                raise
            except Exception as exc:  # classified below: only transient errors are retried
                transient = is_transient(exc)
                self.transcript.append(
                    "error",
                    role,
                    attempt=attempt,
                    transient=transient,
                    error=f"{type(exc).__name__}: {exc}",
                    elapsed_s=round(time.monotonic() - started, 3),
                )
                if not transient:
                    if isinstance(exc, openai.OpenAIError):
                        raise LLMUnavailableError(f"{role}: request refused: {exc}") from exc
                    raise
                # A timeout may have been the repair's
                self._time_left(role, time.monotonic() - started)
                if attempt == attempts:
                    raise LLMUnavailableError(
                        f"{role}: endpoint failed {attempts} times, last: "
                        f"{type(exc).__name__}: {exc}",
                        transient=True,
                    ) from exc
                logger.warning(
                    "%s: transient %s on attempt %d of %d; retrying after a backoff",
                    role,
                    type(exc).__name__,
                    attempt,
                    attempts,
                )
                self.sleep(
                    min(
                        self._delay(attempt, exc), self._time_left(role, time.monotonic() - started)
                    )
                )
            finally:
                self.seconds_spent += time.monotonic() - started  # the backoff counts too

    def _delay(self, attempt: int, exc: Exception) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins when it is longer."""
        base = self.settings.backoff_s * 2 ** (attempt - 1)
        delay = base * (1 + random.random() * 0.25)
        hinted = _retry_after(exc)
        return float(min(max(delay, hinted or 0.0), 60.0))


def _short(exc: ValidationError) -> str:
    """A compact, model-friendly description of what was wrong with the JSON."""
    errors = exc.errors(include_url=False)[:5]
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in errors
    )
