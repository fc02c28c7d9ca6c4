"""A scripted OpenAI-compatible HTTP server on loopback: serves /v1/chat/completions from a queue of replies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One scripted reply: a completion text, or an HTTP error status; optionally slow."""

    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 50
    headers: dict[str, str] = field(default_factory=dict)
    with_usage: bool = True


class FakeOpenAI:
    """The server state: replies still to serve and requests received."""

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""

    def queue(self, *replies: Scripted) -> None:
        with self.lock:
            self.script.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Scripted:
        with self.lock:
            self.requests.append(body)
            if not self.script:
                return Scripted(status=500, content="script exhausted")
            return self.script.pop(0)


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
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.status != 200:
                self._send(reply.status, {"error": {"message": reply.content or "error",
                                                    "type": "server_error"}}, reply.headers)
                return
            self._send(200, {
                "id": f"chatcmpl-{len(state.requests)}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", "fake"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply.content}}],
                "usage": {"prompt_tokens": reply.prompt_tokens,
                          "completion_tokens": reply.completion_tokens,
                          "total_tokens": reply.prompt_tokens + reply.completion_tokens}
                if reply.with_usage else None})

        def _send(self, status: int, payload: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
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
    """Start the server on a free loopback port; yields its state with `.url` set to the /v1 base URL."""
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
