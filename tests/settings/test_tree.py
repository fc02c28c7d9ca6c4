"""The settings tree: groups fed by config.toml tables and their own variables, env over file, one
way per home."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from guardrails.settings import GateSettings
from oomrl.settings import (
    AgentSettings,
    RuntimeSettings,
    SettingsError,
    WebhookSettings,
    child_environment,
    get_settings,
    runtime_from_environment,
    settings_for,
)


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (
        "OOMRL_CONFIG",
        "OOMRL_AGENT_MAX_ROUNDS",
        "OOMRL_WEBHOOK_MAX_ALERTS",
        "PREFECT_API_URL",
        "OOMRL_BROKER_KERNEL",
    ):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("OOMRL_HOME", str(folder))
    return folder


def test_group_tables_of_the_file_and_the_environment_over_them(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text(
        "[oomrl.agent]\nmax_rounds = 3\n[oomrl.webhook]\nmax_alerts = 7\n"
        "[oomrl.runtime]\nprefect_api_url = 'http://file:4200/api'\n"
    )
    settings = get_settings()
    assert (settings.agent.max_rounds, settings.webhook.max_alerts) == (3, 7)
    assert settings.runtime.prefect_api_url == "http://file:4200/api"
    monkeypatch.setenv("OOMRL_AGENT_MAX_ROUNDS", "4")
    monkeypatch.setenv("PREFECT_API_URL", "http://env:4200/api")
    settings = get_settings()
    assert (settings.agent.max_rounds, settings.webhook.max_alerts) == (4, 7)
    assert settings.runtime.prefect_api_url == "http://env:4200/api"


def test_a_bad_group_value_names_its_variable_or_its_key(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text("[oomrl.agent]\nmax_rounds = 0\n")
    with pytest.raises(
        SettingsError, match=r"agent\.max_rounds in .*config\.toml=0: Input should be greater"
    ):
        get_settings()
    monkeypatch.setenv("OOMRL_AGENT_MAX_ROUNDS", "zero")
    with pytest.raises(
        SettingsError, match="OOMRL_AGENT_MAX_ROUNDS='zero': Input should be a valid integer"
    ):
        get_settings()


def test_only_zero_turns_the_broker_kernel_off(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_settings().runtime.broker_kernel
    for value, on in (("0", False), ("1", True), ("false", True)):  # as before: `!= "0"`
        monkeypatch.setenv("OOMRL_BROKER_KERNEL", value)
        assert get_settings().runtime.broker_kernel is on


def test_settings_for_a_home_or_the_environments(home: Path, tmp_path: Path) -> None:
    assert settings_for(None).store.home == home
    assert settings_for(tmp_path / "other").store.home == tmp_path / "other"
    assert (
        settings_for(str(tmp_path / "other")).ledger_url
        == f"sqlite:///{tmp_path / 'other' / 'ledger.db'}"
    )


def test_a_child_is_given_this_environment_and_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_PARENT_ONLY", "1")
    env = child_environment(GIT_TERMINAL_PROMPT="0")
    assert env["OOMRL_PARENT_ONLY"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"


def test_the_gate_reads_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert GateSettings().sandbox_uid == 65534 and GateSettings().image == "python:3.11-slim"
    monkeypatch.setenv("OOMRL_GATE_SANDBOX_UID", "1234")
    monkeypatch.setenv("OOMRL_GATE_IMAGE", "python:3.12-slim")
    assert (GateSettings().sandbox_uid, GateSettings().image) == (1234, "python:3.12-slim")


@pytest.mark.slow
def test_reading_the_settings_imports_no_domain(home: Path) -> None:
    """The settings sit below the domain: reading them loads none of its packages."""
    code = (
        "import sys; from oomrl.settings import get_settings; get_settings(); "
        "print(sorted(m for m in sys.modules if m.startswith(('oomrl.portfolio', 'oomrl.market', "
        "'oomrl.agent', 'oomrl.data', 'oomrl.metrics', 'oomrl.diagnostics', 'oomrl.webhook', "
        "'oomrl.repair', 'oomrl.repair.versions', 'orchestration.stack'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_task_runner_variables_come_through_the_runtime_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tasks.runners import dask_settings

    for name in ("OOMRL_DASK_ADDRESS", "OOMRL_DASK_PROCESSES", "OOMRL_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OOMRL_DASK_WORKERS", "3")
    assert get_settings().runtime.dask_env() == {"OOMRL_DASK_WORKERS": "3"}
    assert dask_settings()["cluster_kwargs"]["n_workers"] == 3  # type: ignore[index]


def test_the_delivery_store_is_its_own_database_else_the_ledger() -> None:
    assert (
        WebhookSettings(db_url="sqlite:///own.db").store_url("sqlite:///ledger.db")
        == "sqlite:///own.db"
    )
    assert WebhookSettings(db_url=None).store_url("sqlite:///ledger.db") == "sqlite:///ledger.db"


def test_a_group_class_alone_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups are read through the root only: built alone they are their defaults."""
    monkeypatch.setenv("OOMRL_AGENT_MAX_ROUNDS", "4")
    monkeypatch.setenv("OOMRL_DASK_WORKERS", "3")
    assert AgentSettings().max_rounds == 2 and RuntimeSettings().dask_workers is None
    assert get_settings().agent.max_rounds == 4


def test_the_file_reaches_what_once_built_its_group_alone(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config.toml's group tables reach the model client, the task runner, Prefect and the build."""
    from oomrl.agent.budget import Budget
    from oomrl.agent.llm import Transcript
    from oomrl.agent.providers import get_provider
    from oomrl.agent.roles import LLMProvider
    from oomrl.build_info import git_sha
    from orchestration.launch import PrefectApi
    from tasks.runners import dask_settings

    for name in ("OOMRL_DASK_ADDRESS", "OOMRL_DASK_WORKERS", "GIT_SHA", "PREFECT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (home / "config.toml").write_text(
        "[oomrl.agent]\nrequest_deadline_s = 7.5\n"
        "[oomrl.runtime]\ndask_workers = '3'\nprefect_api_url = 'http://file:4200/api'\n"
        "git_sha = 'abcdef123456'\n"
    )
    settings = get_settings(agent={"llm_base_url": "http://127.0.0.1:9/v1"})
    budget = Budget.from_settings(settings.agent)
    provider = get_provider(None, settings, budget, Transcript(home / "t.jsonl"))
    assert isinstance(provider, LLMProvider)
    assert provider.client.backend.deadline_s == 7.5  # type: ignore[attr-defined]
    assert dask_settings()["cluster_kwargs"]["n_workers"] == 3  # type: ignore[index]
    assert PrefectApi().api_url == "http://file:4200/api"
    git_sha.cache_clear()
    try:
        assert git_sha(home) == "abcdef123456"  # no checkout at `home`: the setting stands in
    finally:
        git_sha.cache_clear()


def test_the_jailed_host_reads_the_broker_kernel_from_the_environment_alone(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text("[oomrl.runtime]\nbroker_kernel = false\n")
    assert not get_settings().runtime.broker_kernel
    assert runtime_from_environment().broker_kernel
    monkeypatch.setenv("OOMRL_BROKER_KERNEL", "0")
    assert not runtime_from_environment().broker_kernel


def test_every_setting_has_a_variable_of_its_own() -> None:
    from oomrl.settings import GROUPS, variables

    assert len(variables()) == sum(len(cls.model_fields) for cls in GROUPS.values())
    assert {"OOMRL_HOME", "OOMRL_LEDGER_URL", "OOMRL_MARKET_RULES", "OOMRL_LLM_BASE_URL"} <= set(
        variables()
    )
