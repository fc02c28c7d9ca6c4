"""Test session set-up: offline (loopback-only sockets), isolated OOMRL_HOME and PREFECT_HOME, one
Prefect harness."""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Isolate Prefect and oomrl state before anything imports prefect.
_SESSION_ROOT = Path(tempfile.mkdtemp(prefix="oomrl-test-"))
os.environ["PREFECT_HOME"] = str(_SESSION_ROOT / "prefect")
os.environ.pop("PREFECT_API_URL", None)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ["OOMRL_HOME"] = str(_SESSION_ROOT / "home")
os.environ.pop("OOMRL_LLM_BASE_URL", None)
# A repair that passes promotes at once unless a test asks for a probation
# (tests/agent/test_probation.py); the default (20 forward sessions) is asserted there.
os.environ["OOMRL_AGENT_PROBATION_SESSIONS"] = "0"
os.environ.pop("OOMRL_LLM_API_KEY", None)
os.environ.pop("OPENAI_API_KEY", None)

REPO_ROOT = Path(__file__).resolve().parent.parent
# tests/strategies call the bundled strategies through a jailed strategy host, as the gate's tests
# do.
pytest_plugins = ("guardrails.sandbox.hostplugin",)
FIXTURES = Path(__file__).resolve().parent / "fixtures"


class NetworkBlockedError(RuntimeError):
    """A test tried to reach a non-loopback address."""


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback
                for info in _real_getaddrinfo(host, None)
            )
        except OSError:
            return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise NetworkBlockedError(f"network access blocked in tests: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise NetworkBlockedError(f"network access blocked in tests: {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host not in (None, "localhost", "") and isinstance(host, (str, bytes)):
        name = host.decode() if isinstance(host, bytes) else host
        try:
            if not ipaddress.ip_address(name).is_loopback:
                raise NetworkBlockedError(f"network access blocked in tests: {name}")
        except ValueError:
            raise NetworkBlockedError(f"DNS lookup blocked in tests: {name}") from None
    return _real_getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test harness (temporary server and database) for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def dask_extra_missing() -> str | None:
    """Why the `dask` extra is unusable (a package of it not installed), or None when it is
    installed."""
    from importlib.util import find_spec

    for name in ("prefect_dask", "distributed"):
        if find_spec(name) is None:
            return f"{name} is not installed (pip install -e '.[dask]')"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on the Prefect harness starts a server (tens of seconds on 2 cores): it is slow by
    definition.

    A test marked `dask` needs the optional dask extra: it skips, naming the missing package,
    without it.
    """
    missing = dask_extra_missing()
    for item in items:
        if "prefect_harness" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        if missing and item.get_closest_marker("dask") is not None:
            item.add_marker(pytest.mark.skip(reason=f"dask extra absent: {missing}"))


@pytest.fixture()
def oomrl_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh OOMRL_HOME for one test."""
    home = tmp_path / "oomrl-home"
    monkeypatch.setenv("OOMRL_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def postgres_url() -> str | None:
    """The PostgreSQL URL for tests that also run on PostgreSQL, or None when not configured."""
    return os.environ.get("OOMRL_TEST_POSTGRES_URL") or None


@contextmanager
def postgres_schema(url: str, prefix: str) -> Iterator[str]:
    """A fresh PostgreSQL schema on the server of `url`, dropped with everything in it
    afterwards."""
    import uuid

    import sqlalchemy as sa

    from oomrl.portfolio.ledger_tables import driver_url

    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(driver_url(url))
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield schema
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
