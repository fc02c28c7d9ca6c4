"""Settings: environment (OOMRL_ prefix) over an optional TOML file over defaults; paths under OOMRL_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomrl.config import get_settings


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("OOMRL_CONFIG", "OOMRL_LEDGER_URL", "OOMRL_LLM_PROVIDER", "OOMRL_LLM_BASE_URL",
                 "OOMRL_LLM_API_KEY", "OOMRL_KILL_THRESHOLD"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("OOMRL_HOME", str(home))
    return home


def test_paths_and_ledger_default_under_home(clean_env: Path) -> None:
    settings = get_settings()
    assert settings.home == clean_env
    assert settings.data_dir == clean_env / "data" and settings.runs_dir == clean_env / "runs"
    assert settings.workspace_dir == clean_env / "workspace"
    assert settings.ledger == f"sqlite:///{clean_env / 'ledger.db'}"
    settings.ensure_dirs()
    assert settings.data_dir.is_dir() and settings.runs_dir.is_dir()


def test_environment_overrides_the_config_file(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env.mkdir(parents=True)
    (clean_env / "config.toml").write_text('[oomrl]\nkill_threshold = 0.3\naccount = "fund-a"\n')
    assert get_settings().kill_threshold == 0.3 and get_settings().account == "fund-a"
    monkeypatch.setenv("OOMRL_KILL_THRESHOLD", "0.15")
    assert get_settings().kill_threshold == 0.15 and get_settings().account == "fund-a"


def test_named_config_file_without_table(clean_env: Path, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    named = tmp_path / "oomrl.toml"
    named.write_text('ledger_url = "postgresql+psycopg2://db/oomrl"\n')
    monkeypatch.setenv("OOMRL_CONFIG", str(named))
    assert get_settings().ledger == "postgresql+psycopg2://db/oomrl"


def test_missing_named_config_file_is_named(clean_env: Path, monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.setenv("OOMRL_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(FileNotFoundError, match="absent.toml"):
        get_settings()


def test_invalid_toml_is_named(clean_env: Path) -> None:
    clean_env.mkdir(parents=True)
    (clean_env / "config.toml").write_text("kill_threshold = = 1\n")
    with pytest.raises(ValueError, match="config.toml is not valid TOML"):
        get_settings()


def test_provider_is_offline_unless_an_endpoint_is_configured(clean_env: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_settings().llm_provider_name == "offline"
    monkeypatch.setenv("OOMRL_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    assert get_settings().llm_provider_name == "openai"
    monkeypatch.setenv("OOMRL_LLM_PROVIDER", "replay")
    assert get_settings().llm_provider_name == "replay"
