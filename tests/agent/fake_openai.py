"""A scripted OpenAI-compatible HTTP server on loopback: serves /v1/chat/completions from a queue of
replies, or from a scripted agent that answers each role in turn and bills like a real server."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

# Usage a real server would bill: ~4 bytes a token (measured), or the request's whole max_tokens.
Billing = int | Literal["measured", "max"]


@dataclass
class Scripted:
    """One scripted reply: a completion text, or an HTTP error status; optionally held back until
    the server stops (`hang`: a client's timeout fires first however loaded the machine, unlike a
    delay)."""

    content: str | None = None
    status: int = 200
    hang: bool = False
    prompt_tokens: Billing = 100
    completion_tokens: Billing = 50
    headers: dict[str, str] = field(default_factory=dict)
    with_usage: bool = True
    # A 200 whose body is these bytes, not a chat completion (truncated JSON, a wrong shape).
    body: bytes | None = None
    # Send the whole answer, status line and headers too, one byte every `drip_s` seconds, after
    # `padding` bytes of headers (a read timeout never fires; only a total deadline stops it).
    drip_s: float | None = None
    padding: int = 0


def billed(body: dict[str, Any], reply: Scripted) -> tuple[int, int]:
    """The usage the server reports for `reply` to request `body`."""
    prompt_bytes = sum(len(str(m.get("content", "")).encode()) for m in body.get("messages", []))
    prompt = (
        math.ceil(prompt_bytes / 4)
        if reply.prompt_tokens in ("measured", "max")
        else reply.prompt_tokens
    )
    if reply.completion_tokens == "max":
        completion = int(body.get("max_tokens") or 0)
    elif reply.completion_tokens == "measured":
        completion = math.ceil(len((reply.content or "").encode()) / 4)
    else:
        completion = int(reply.completion_tokens)
    return int(prompt), completion


ROLE_TITLES = {
    "# Role: Critic": "critic",
    "# Role: Test Author": "test_author",
    "# Role: Coder": "coder",
}


def role_of(body: dict[str, Any]) -> str:
    """The role a request is for, from the first line of its system prompt."""
    first = str(body["messages"][0]["content"]).splitlines()[0]
    return next(role for title, role in ROLE_TITLES.items() if first.startswith(title))


class ScriptedAgent:
    """Plays an agent: each role's next scripted answer, in order; keeps what each role was
    shown."""

    def __init__(self, answers: dict[str, list[str]], billing: Billing = "measured") -> None:
        self.answers = {role: list(texts) for role, texts in answers.items()}
        self.shown: dict[str, list[dict[str, Any]]] = {role: [] for role in ROLE_TITLES.values()}
        self.billing = billing

    def __call__(self, body: dict[str, Any]) -> Scripted:
        role = role_of(body)
        self.shown[role].append(json.loads(body["messages"][-1]["content"]))
        if not self.answers.get(role):
            return Scripted(status=500, content=f"the scripted agent has no more {role} answers")
        return Scripted(
            content=self.answers[role].pop(0),
            prompt_tokens="measured",
            completion_tokens=self.billing,
        )


class FakeOpenAI:
    """The server state: replies still to serve (or an agent that answers), and requests
    received."""

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""
        self.agent: Callable[[dict[str, Any]], Scripted] | None = None
        self.stopping = threading.Event()  # releases the replies held back by `hang`

    def queue(self, *replies: Scripted) -> None:
        with self.lock:
            self.script.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Scripted:
        with self.lock:
            self.requests.append(body)
            if self.script:
                return self.script.pop(0)
            if self.agent is not None:
                return self.agent(body)
            return Scripted(status=500, content="script exhausted")


def _handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply = state.next_reply(body)
            if reply.hang:
                state.stopping.wait()
            if reply.body is not None:
                self._send_raw(200, reply.body, reply)
                return
            if reply.status != 200:
                self._send(
                    reply.status,
                    {"error": {"message": reply.content or "error", "type": "server_error"}},
                    reply.headers,
                )
                return
            prompt, completion = billed(body, reply)
            self._send_or_drip(
                reply,
                {
                    "id": f"chatcmpl-{len(state.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    }
                    if reply.with_usage
                    else None,
                },
            )

        def _send_or_drip(self, reply: Scripted, payload: dict[str, Any]) -> None:
            if reply.drip_s is None:
                self._send(200, payload, reply.headers)
            else:
                self._send_raw(200, json.dumps(payload).encode(), reply)

        def _send_raw(self, status: int, data: bytes, reply: Scripted) -> None:
            # "connection: close" because this handler closes it: without it the client may reuse
            # the pooled connection before it sees the close, and a retry it did not need lands in
            # the transcript
            head = (
                f"HTTP/1.1 {status} OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                f"content-length: {len(data)}\r\n"
                + (f"x-pad: {'a' * reply.padding}\r\n" if reply.padding else "")
                + "\r\n"
            ).encode()
            try:
                if reply.drip_s is None:
                    self.wfile.write(head + data)
                    return
                for byte in head + data:
                    if state.stopping.wait(reply.drip_s):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up and left
            finally:
                self.close_connection = True

        def _send(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left

    return Handler


@contextmanager
def serve_fake_openai() -> Iterator[FakeOpenAI]:
    """Start the server on a free loopback port; yields its state with `.url` set to the /v1 base
    URL."""
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    # A short poll: shutdown() waits up to one interval, 0.5 s by default, at the end of every test.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        state.stopping.set()
        server.shutdown()
        server.server_close()
