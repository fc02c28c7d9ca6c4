"""Settings: environment (OOMRL_ prefix) over an optional TOML file over defaults; paths under
OOMRL_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oomrl.settings import SettingsError, get_settings


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (
        "OOMRL_CONFIG",
        "OOMRL_LEDGER_URL",
        "OOMRL_LLM_PROVIDER",
        "OOMRL_LLM_BASE_URL",
        "OOMRL_LLM_API_KEY",
        "OOMRL_KILL_THRESHOLD",
    ):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("OOMRL_HOME", str(home))
    return home


def test_paths_and_ledger_default_under_home(clean_env: Path) -> None:
    settings = get_settings()
    assert settings.store.home == clean_env
    assert (
        settings.store.data_dir == clean_env / "data"
        and settings.store.runs_dir == clean_env / "runs"
    )
    assert settings.store.workspace_dir == clean_env / "workspace"
    assert settings.ledger_url == f"sqlite:///{clean_env / 'ledger.db'}"
    settings.store.ensure_dirs()
    assert settings.store.data_dir.is_dir() and settings.store.runs_dir.is_dir()


def test_environment_overrides_the_config_file(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_env.mkdir(parents=True)
    (clean_env / "config.toml").write_text(
        '[oomrl.ledger]\nkill_threshold = 0.3\naccount = "fund-a"\n'
    )
    assert get_settings().ledger.kill_threshold == 0.3 and get_settings().ledger.account == "fund-a"
    monkeypatch.setenv("OOMRL_KILL_THRESHOLD", "0.15")
    assert (
        get_settings().ledger.kill_threshold == 0.15 and get_settings().ledger.account == "fund-a"
    )


def test_named_config_file_without_table(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    named = tmp_path / "oomrl.toml"
    named.write_text('[ledger]\nurl = "postgresql+psycopg2://db/oomrl"\n')
    monkeypatch.setenv("OOMRL_CONFIG", str(named))
    assert get_settings().ledger_url == "postgresql+psycopg2://db/oomrl"


def test_missing_named_config_file_is_named(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OOMRL_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(
        SettingsError, match="OOMRL_CONFIG names .*absent.toml, which does not exist"
    ):
        get_settings()


def test_invalid_toml_is_named(clean_env: Path) -> None:
    clean_env.mkdir(parents=True)
    (clean_env / "config.toml").write_text("kill_threshold = = 1\n")
    with pytest.raises(SettingsError, match="config.toml is not valid TOML"):
        get_settings()


def test_provider_is_offline_unless_an_endpoint_is_configured(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert get_settings().agent.llm_provider_name == "offline"
    monkeypatch.setenv("OOMRL_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    assert get_settings().agent.llm_provider_name == "openai"
    monkeypatch.setenv("OOMRL_LLM_PROVIDER", "replay")
    assert get_settings().agent.llm_provider_name == "replay"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "OOMRL_KILL_THRESHOLD",
            "abc",
            "OOMRL_KILL_THRESHOLD='abc': Input should be a valid number",
        ),
        (
            "OOMRL_KILL_THRESHOLD",
            "1.5",
            "OOMRL_KILL_THRESHOLD='1.5': Input should be less than or equal to 1",
        ),
        ("OOMRL_INITIAL_CASH", "nan", "OOMRL_INITIAL_CASH='nan': Input should be a finite number"),
        ("OOMRL_INITIAL_CASH", "-5", "OOMRL_INITIAL_CASH='-5': Input should be greater than 0"),
        (
            "OOMRL_REWARD_LAMBDA",
            "inf",
            "OOMRL_REWARD_LAMBDA='inf': Input should be a finite number",
        ),
        ("OOMRL_LEDGER_URL", "garbage", "OOMRL_LEDGER_URL='garbage': not a database URL"),
        (
            "OOMRL_LEDGER_URL",
            "nosuchdb://h/db",
            "OOMRL_LEDGER_URL='nosuchdb://h/db': not a database URL",
        ),
        ("OOMRL_ACCOUNT", "", "OOMRL_ACCOUNT='': account name must not be empty"),
        ("OOMRL_ACCOUNT", "a" * 65, "account name is 65 characters; at most 64"),
        ("OOMRL_ACCOUNT", "../etc", "may only use letters, digits"),
        (
            "OOMRL_LLM_PROVIDER",
            "gpt",
            "OOMRL_LLM_PROVIDER='gpt': Input should be 'offline', 'openai' or 'replay'",
        ),
        ("OOMRL_LLM_BASE_URL", "ftp://x", "OOMRL_LLM_BASE_URL='ftp://x'"),
        ("OOMRL_HOME", " ", "OOMRL_HOME=' ': must name a folder"),
    ],
)
def test_bad_settings_name_the_variable_and_the_problem(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        get_settings()
    assert message in str(caught.value)


def test_bad_config_file_values_name_the_file_and_key(clean_env: Path) -> None:
    clean_env.mkdir(parents=True)
    (clean_env / "config.toml").write_text("[oomrl.ledger]\ninitial_cash = nan\n")
    with pytest.raises(
        SettingsError, match=r"ledger.initial_cash in .*config.toml=nan: must be a finite number"
    ):
        get_settings()
    (clean_env / "config.toml").write_text("[oomrl]\nkill_treshold = 0.3\n[alerts]\nx = 1\n")
    with pytest.raises(SettingsError, match="unknown setting.s. kill_treshold"):
        get_settings()
    (clean_env / "config.toml").write_text("[oomrl.ledger]\nkill_treshold = 0.3\n")
    with pytest.raises(SettingsError, match="ledger.kill_treshold in .*: Extra inputs are not"):
        get_settings()
    (clean_env / "config.toml").write_text("oomrl = 3\n")
    with pytest.raises(SettingsError, match=r"\[oomrl\] must be a table"):
        get_settings()


def test_config_file_that_cannot_be_read_or_is_empty_named(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OOMRL_CONFIG", str(tmp_path))  # a folder, not a file
    with pytest.raises(SettingsError, match=f"config file {tmp_path} is not a regular file"):
        get_settings()
    unreadable = tmp_path / "locked.toml"
    unreadable.write_text("[oomrl]\n")
    monkeypatch.setenv("OOMRL_CONFIG", str(unreadable))
    monkeypatch.setattr(Path, "open", _refuse)
    with pytest.raises(
        SettingsError, match=f"cannot read config file {unreadable}: Permission denied"
    ):
        get_settings()
    monkeypatch.undo()
    monkeypatch.setenv("OOMRL_CONFIG", " ")
    with pytest.raises(SettingsError, match="OOMRL_CONFIG is set but empty"):
        get_settings()


def test_empty_optional_settings_mean_unset(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOMRL_LLM_PROVIDER", "")
    monkeypatch.setenv("OOMRL_LLM_API_KEY", " ")
    assert get_settings().agent.llm_provider_name == "offline"


def _refuse(self: Path, *args: object, **kwargs: object) -> None:
    raise PermissionError(13, "Permission denied")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "latin1.toml",
            "[oomrl]\naccount = 'caf\xe9'\n".encode("latin-1"),
            "is not UTF-8 text (byte 22: invalid continuation byte)",
        ),
        ("big.toml", b"# " + b"x" * (1024 * 1024) + b"\n", "is larger than 1048576 bytes"),
        (
            "nested.toml",
            b"[oomrl.ledger]\naccount = 'a'\n[oomrl.alerts]\nx = 1\n",
            "unknown setting(s) [oomrl.alerts]",
        ),
        (
            "misplaced.toml",
            b"[oomrl]\nledger = 'a'\n",
            "ledger is a group of settings: write it as the table [oomrl.ledger]",
        ),
        (
            "flat.toml",
            b"[oomrl]\nkill_threshold = 0.3\n[oomrl.market_rules.cn]\nimpact_k = 0.2\n",
            "settings moved into groups: kill_threshold is now kill_threshold under "
            "[oomrl.ledger]; market_rules is now rules under [oomrl.market]",
        ),
    ],
)
def test_config_files_that_would_be_misread_are_named(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    name: str,
    content: bytes,
    message: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    monkeypatch.setenv("OOMRL_CONFIG", str(path))
    with pytest.raises(SettingsError) as caught:
        get_settings()
    assert str(caught.value).startswith(f"config file {path}") and message in str(caught.value)


def test_a_device_as_config_file_is_refused_at_once(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """/dev/zero never ends and a FIFO never opens without a writer: neither is read."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    for device in ("/dev/zero", str(fifo)):
        monkeypatch.setenv("OOMRL_CONFIG", device)
        with pytest.raises(SettingsError, match=f"config file {device} is not a regular file"):
            get_settings()


def test_other_tools_tables_and_market_rules_tables_are_kept(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "shared.toml"
    path.write_text(
        "[ledger]\nkill_threshold = 0.3\n[market.rules.cn]\nimpact_k = 0.2\n"
        "[tool.black]\nline-length = 1\n"
    )
    monkeypatch.setenv("OOMRL_CONFIG", str(path))
    settings = get_settings()
    assert settings.ledger.kill_threshold == 0.3 and settings.market.rules == {
        "cn": {"impact_k": 0.2}
    }


def test_initial_cash_beyond_what_the_ledger_can_book_is_named(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOMRL_INITIAL_CASH", "1e17")
    with pytest.raises(
        SettingsError,
        match=r"OOMRL_INITIAL_CASH='1e17': Input should be less than or equal to 1000000000000",
    ):
        get_settings()
