"""A total deadline for one HTTP request to a model endpoint, whatever the server's pace.

httpx's timeouts are per socket operation. A server that sends one byte every few seconds never
trips a read timeout. So a request could last for hours. Here every connect, read and write of a
request gets at most the time left before its deadline. Once it has passed, they get none. So the
request ends on time, as httpx's own timeout, which the client retries like any timeout.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

_deadline = threading.local()


@dataclass
class _Frame:
    """One open deadline: its length, and when it ends (None until its first network operation)."""

    seconds: float
    ends: float | None = None


def _frames() -> list[_Frame]:
    """This thread's open deadlines, outermost first."""
    if not hasattr(_deadline, "frames"):
        _deadline.frames = []
    frames: list[_Frame] = _deadline.frames
    return frames


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The socket timeout to use: `timeout`, cut to what is left of this thread's deadlines.

    A deadline's clock starts at its first network operation, not when the block opens. The
    client's own start-up is not the server's time. The SDK's first request imports and builds
    a lot."""
    frames = _frames()
    if not frames:
        return timeout
    now = time.monotonic()
    ends = []
    for frame in frames:
        if frame.ends is None:
            frame.ends = now + frame.seconds
        ends.append(frame.ends)
    left = min(ends) - now
    if left <= 0:
        raise error("the request's total deadline has passed")
    return left if timeout is None else min(timeout, left)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every network operation of this thread inside the block ends by `seconds` after the first."""
    frames = _frames()
    frames.append(_Frame(seconds))
    try:
        yield
    finally:
        frames.pop()


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes stop at the thread's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return DeadlineStream(
            self.inner.start_tls(
                ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
            )
        )

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own socket backend, its streams bounded by the thread's deadline."""

    def __init__(self) -> None:
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return DeadlineStream(
            self.inner.connect_tcp(
                host, port, _left(timeout, httpcore.ConnectTimeout), local_address, socket_options
            )
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return DeadlineStream(
            self.inner.connect_unix_socket(
                path, _left(timeout, httpcore.ConnectTimeout), socket_options
            )
        )

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _ClosingClient(httpx.Client):
    """Closed with the backend that owns it, as the openai SDK's own client is. No socket outlives
    it."""

    def __del__(self) -> None:
        if not self.is_closed:
            with suppress(Exception):  # the interpreter may be shutting down
                self.close()


def deadline_client(timeout_s: float) -> httpx.Client:
    """An httpx client whose requests honour `deadline(...)`.

    Built as the openai SDK builds one, environment proxies included."""
    client = _ClosingClient(timeout=timeout_s, follow_redirects=True)
    # httpx builds its connection pools itself and offers no way to pass a network backend. So set
    # each pool's (the direct one, and a proxy's) before its first connection.
    # tests/agent/test_llm_faults.py proves a dripping server is cut off. So an httpx that changes
    # this fails there, not in production.
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if transport is not None and not hasattr(pool, "_network_backend"):
            raise RuntimeError("this httpx has no connection pool to bound: pin httpx < 1")
        if pool is not None:
            pool._network_backend = DeadlineBackend()
    return client
