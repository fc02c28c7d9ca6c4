"""The test session is offline: non-loopback connections and DNS lookups fail, loopback works."""

import socket

import pytest

from tests.conftest import NetworkBlockedError


def test_public_address_is_blocked() -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
        pytest.raises(NetworkBlockedError, match="8.8.8.8"),
    ):
        sock.connect(("8.8.8.8", 53))


def test_dns_lookup_is_blocked() -> None:
    with pytest.raises(NetworkBlockedError, match="example.com"):
        socket.getaddrinfo("example.com", 443)


def test_loopback_is_allowed() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            assert client.getpeername()[1] == port
