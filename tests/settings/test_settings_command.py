"""`oomrl settings`: every setting with its variable, description, value (secrets masked) and
source."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomrl.cli import app
from oomrl.settings import GROUPS, OomrlSettings
from oomrl.settings.listing import MASK

SECRET = "s3cret-value-that-is-long-enough"


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("OOMRL_CONFIG", raising=False)
    monkeypatch.delenv("OOMRL_KILL_THRESHOLD", raising=False)
    monkeypatch.delenv("OOMRL_AGENT_MAX_ROUNDS", raising=False)
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("OOMRL_HOME", str(folder))
    return folder


def lines_of(output: str) -> dict[str, str]:
    """Each setting's line by its dotted name."""
    return {
        line.split(" = ")[0]: line
        for line in output.splitlines()
        if " = " in line and not line.startswith(" ")
    }


def test_every_setting_is_listed_with_its_source(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text(
        "[oomrl]\nkill_threshold = 0.3\n[oomrl.agent]\nmax_rounds = 3\n"
    )
    monkeypatch.setenv("OOMRL_AGENT_MAX_TOKENS", "5000")
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", SECRET)
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0, result.output
    shown = lines_of(result.output)
    assert shown["kill_threshold"] == "kill_threshold = 0.3  [config.toml; OOMRL_KILL_THRESHOLD]"
    assert (
        shown["agent.max_rounds"] == "agent.max_rounds = 3  [config.toml; OOMRL_AGENT_MAX_ROUNDS]"
    )
    assert shown["agent.max_tokens"] == "agent.max_tokens = 5000  [env; OOMRL_AGENT_MAX_TOKENS]"
    assert shown["initial_cash"] == "initial_cash = 10000000.0  [default; OOMRL_INITIAL_CASH]"
    assert shown["runtime.prefect_api_url"].endswith("[default; PREFECT_API_URL]")
    assert shown["webhook.secret"] == f"webhook.secret = {MASK}  [env; OOMRL_WEBHOOK_SECRET]"
    assert SECRET not in result.output
    expected = [name for name in OomrlSettings.model_fields if name not in GROUPS] + [
        f"{group}.{name}" for group, cls in GROUPS.items() for name in cls.model_fields
    ]
    assert list(shown) == expected
    assert "    Tokens one repair may spend (tokens)." in result.output


def test_every_setting_has_a_description() -> None:
    classes = [OomrlSettings, *GROUPS.values()]
    assert all(field.description for cls in classes for field in cls.model_fields.values())


def test_a_bad_setting_is_one_error_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_AGENT_MAX_ROUNDS", "0")
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 1
    assert "OOMRL_AGENT_MAX_ROUNDS='0': Input should be greater than or equal to 1" in result.output
