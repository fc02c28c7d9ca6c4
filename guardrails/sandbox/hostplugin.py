"""pytest plugin: a workspace's tests reach its strategies through a jailed host, outside the gate.

Run it as `python -m pytest -p guardrails.sandbox.hostplugin tests/strategies`. The project's own
suite loads it from tests/conftest.py. The first call through `strategy_host` starts one host for
the workspace at the rootdir. Override that with `--strategy-workspace DIR`. The host runs in the
jail the gate uses; `--strategy-lock hash-only` runs without one. When pytest-cov measures the run,
the host measures S too. Its data joins pytest-cov's before the report. It is a
`.coverage.strategyhost.*` file next to its data file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_HOSTS: list[Any] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("strategy host")
    group.addoption(
        "--strategy-workspace",
        default=None,
        help="folder holding the strategies/ the tests call (default: the rootdir)",
    )
    group.addoption(
        "--strategy-lock",
        default=None,
        choices=("bwrap", "hash-only"),
        help="jail of the strategy host (default: the strongest available)",
    )


def _coverage_file(config: pytest.Config) -> Path | None:
    plugin = config.pluginmanager.getplugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    cov = getattr(controller, "cov", None)
    return Path(os.path.abspath(cov.config.data_file)) if cov is not None else None


def pytest_configure(config: pytest.Config) -> None:
    import strategy_host

    def factory() -> Any:
        from guardrails.errors import GateSetupError
        from guardrails.sandbox.backends import select_lock
        from guardrails.sandbox.strategyhost import HostSpec, start_host
        from guardrails.workspace import load_contract

        root = Path(config.getoption("strategy_workspace") or config.rootpath)
        try:
            contract = load_contract(root)
            sources, memory = contract.source, contract.memory_limit_mb
        except GateSetupError:
            sources, memory = ("strategies",), 4096
        measure = _coverage_file(config) is not None
        host = start_host(
            select_lock(config.getoption("strategy_lock")),
            HostSpec(root.resolve(), sources, measure, memory),
        )
        _HOSTS.append((host, root.resolve()))
        return host.channel

    strategy_host.connect_lazily(factory)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:  # inside pytest-cov's own wrapper: the host's data is there before it combines
        _finish(session.config)


def _finish(config: pytest.Config) -> None:
    import strategy_host

    strategy_host.connect(None)
    strategy_host.connect_lazily(None)
    target = _coverage_file(config)
    while _HOSTS:
        host, root = _HOSTS.pop()
        answer = host.finish()
        data = answer.get("coverage")
        if target is None or data is None:
            continue
        from guardrails.sandbox.coverage_data import map_data

        raw = target.parent / f".coverage.strategyhost-raw.{uuid.uuid4().hex}"
        raw.write_bytes(bytes(data))
        try:
            map_data(
                raw,
                target.parent / f"{target.name}.strategyhost.{os.getpid()}.{uuid.uuid4().hex[:8]}",
                host.workspace_inside,
                root,
            )
        finally:
            raw.unlink()
