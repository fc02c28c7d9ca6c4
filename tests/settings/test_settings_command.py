"""`oomrl settings`: every setting with its variable, description, value (secrets masked) and
source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oomrl.ops.cli import app
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
        "[oomrl.ledger]\nkill_threshold = 0.3\n[oomrl.agent]\nmax_rounds = 3\n"
    )
    monkeypatch.setenv("OOMRL_AGENT_MAX_TOKENS", "5000")
    monkeypatch.setenv("OOMRL_WEBHOOK_SECRET", SECRET)
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0, result.output
    shown = lines_of(result.output)
    assert (
        shown["ledger.kill_threshold"]
        == "ledger.kill_threshold = 0.3  [config.toml; OOMRL_KILL_THRESHOLD]"
    )
    assert (
        shown["agent.max_rounds"] == "agent.max_rounds = 3  [config.toml; OOMRL_AGENT_MAX_ROUNDS]"
    )
    assert shown["agent.max_tokens"] == "agent.max_tokens = 5000  [env; OOMRL_AGENT_MAX_TOKENS]"
    assert (
        shown["ledger.initial_cash"]
        == "ledger.initial_cash = 10000000.0  [default; OOMRL_INITIAL_CASH]"
    )
    assert shown["store.home"] == f"store.home = {home}  [env; OOMRL_HOME]"
    for name, variable in (
        ("ledger.url", "OOMRL_LEDGER_URL"),
        ("market.rules", "OOMRL_MARKET_RULES"),
        ("market.reward_gamma", "OOMRL_REWARD_GAMMA"),
        ("agent.llm_base_url", "OOMRL_LLM_BASE_URL"),
        ("agent.repair_max_running", "OOMRL_REPAIR_MAX_RUNNING"),
        ("runtime.unsafe_no_jail", "OOMRL_UNSAFE_NO_JAIL"),
        ("store.sample_clock", "OOMRL_SAMPLE_CLOCK"),
    ):
        assert shown[name].endswith(f"; {variable}]"), shown[name]
    assert shown["runtime.prefect_api_url"].endswith("[default; PREFECT_API_URL]")
    assert shown["webhook.secret"] == f"webhook.secret = {MASK}  [env; OOMRL_WEBHOOK_SECRET]"
    assert SECRET not in result.output
    expected = [f"{group}.{name}" for group, cls in GROUPS.items() for name in cls.model_fields]
    assert list(GROUPS) == list(OomrlSettings.model_fields)
    assert list(shown) == expected
    assert "    Tokens one repair may spend (tokens)." in result.output


def test_every_setting_has_a_short_description() -> None:
    """A description is sentences of at most 15 words, its unit (if any) in closing parentheses."""
    for cls in [OomrlSettings, *GROUPS.values()]:
        for name, field in cls.model_fields.items():
            text = field.description or ""
            assert text.endswith("."), f"{cls.__name__}.{name}: {text!r}"
            longest = max(len(sentence.split()) for sentence in re.split(r"(?<=\.) ", text))
            assert longest <= 15, f"{cls.__name__}.{name}: {longest} words"


def test_a_bad_setting_is_one_error_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMRL_AGENT_MAX_ROUNDS", "0")
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 1
    assert "OOMRL_AGENT_MAX_ROUNDS='0': Input should be greater than or equal to 1" in result.output


def test_a_variable_in_lower_case_is_read_and_listed_as_from_the_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sources match variable names ignoring case; the listing says so for the same value."""
    monkeypatch.setenv("oomrl_agent_max_tokens", "4321")
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0, result.output
    shown = lines_of(result.output)["agent.max_tokens"]
    assert shown == "agent.max_tokens = 4321  [env; OOMRL_AGENT_MAX_TOKENS]"
