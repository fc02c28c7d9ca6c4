"""The checkable claims of README.md and docs/operations.md, read from the pages at test time: every
`oomrl ...` command and option they show exists (with its choices), every OOMRL_* variable they name
is read by the code (with the default they state), every repository path and anchor they link
exists, the exit codes and messages they quote are the code's, and the figures a fast test can
recompute (defaults, limits, the red-team corpus, the CSI 300 figures of the bundled fixture) are
the code's. Offline and fast: nothing here runs a replay, a gate or a server."""

from __future__ import annotations

import ast
import csv
import importlib.util
import re
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from orchestration.cli import app

REPO = Path(__file__).resolve().parents[1]
PAGES = {
    name: (REPO / name).read_text(encoding="utf-8") for name in ("README.md", "docs/operations.md")
}
README, OPERATIONS = PAGES["README.md"], PAGES["docs/operations.md"]
CODE_TREES = (
    "oomrl",
    "orchestration",
    "guardrails",
    "strategies",
    "strategy_api",
    "strategy_host",
    "tasks",
    "flows",
    "infra",
    "scripts",
)
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
ROOT: Any = typer.main.get_command(app)


# --- reading the pages ---------------------------------------------------------------------------


def fenced(page: str) -> list[str]:
    """The lines of the page's fenced code blocks, `\\` continuations joined."""
    lines: list[str] = []
    for block in FENCE.findall(page):
        lines += block.replace("\\\n", " ").splitlines()
    return lines


def spans(page: str) -> list[str]:
    """The inline code spans outside fenced blocks (`x` and ``x with `ticks` ``), newlines as
    spaces."""
    prose = FENCE.sub("", page)
    return [" ".join(text.split()) for _, text in re.findall(r"(`+)(.+?)\1", prose, re.S)]


def all_code(page: str) -> list[str]:
    return fenced(page) + spans(page)


def figure(page: str, pattern: str) -> str:
    """The first group of `pattern` in the page (whitespace-tolerant); the claim must be there."""
    found = re.search(pattern.replace(" ", r"\s+"), page, re.S)
    assert found, f"the page no longer states {pattern!r}: update this test with the page"
    return found.group(1)


def code_text() -> str:
    """Every Python, YAML, shell and Docker source of the code trees, as one text."""
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for tree in CODE_TREES
        for path in sorted((REPO / tree).rglob("*"))
        if path.is_file()
        and (path.suffix in (".py", ".yaml", ".yml", ".sh", ".json") or path.name == "Dockerfile")
    )


CODE = code_text() + (REPO / "prefect.yaml").read_text(encoding="utf-8")


# --- commands and options ------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"^(<.*>|[A-Z][A-Z_]*|\.\.\.|…|-)$")


def invocations(page: str) -> Iterator[str]:
    """Every `oomrl ...` in the page's code, up to the end of its command (a pipe of alternatives
    such as `oomrl versions show v2 | activate v2` kept whole)."""
    for code in all_code(page):
        for part in re.split(r"(?<![\w/.-])(?=oomrl\s)", code)[1:]:
            yield re.split(r"[;&]|\s#|\s=\s|:\s", part)[0]


def tokens(text: str) -> list[str]:
    return [t for t in (raw.strip("[](),:`'\"") for raw in text.split()) if t]


def params(command: Any) -> dict[str, Any]:
    return {opt: p for p in command.params for opt in (*p.opts, *getattr(p, "secondary_opts", []))}


def choices_of(param: Any) -> list[str]:
    """The fixed choices of an option (none for a free value)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or not getattr(descriptor, "is_choice", False):
        return []
    return [str(choice) for choice in descriptor.choices]


def check_invocation(text: str) -> list[str]:
    """What is wrong with one `oomrl ...` of a page: unknown commands, options or choices."""
    problems: list[str] = []
    head, *alternatives = text.split("|")
    words = tokens(head)[1:]
    command, path = ROOT, ["oomrl"]
    group = ROOT
    i = 0
    while i < len(words):
        word = words[i]
        subs = getattr(command, "commands", None)
        if word.startswith("--"):
            name = word.split("=")[0]
            param = params(command).get(name)
            if param is None and name != "--help":
                problems.append(f"`{' '.join(path)}` has no option {name}")
            elif param is not None and not getattr(param, "is_flag", False) and "=" not in word:
                i += 1
                value = words[i] if i < len(words) else ""
                choices = choices_of(param)
                if choices and value and not PLACEHOLDER.match(value) and value not in choices:
                    problems.append(
                        f"`{' '.join(path)} {name} {value}`: not one of {list(choices)}"
                    )
                if name == "--source" and value:
                    from oomrl.data.sources import SOURCES

                    if value.split(":")[0] not in SOURCES:
                        problems.append(
                            f"--source {value}: no such source (SOURCES: {sorted(SOURCES)})"
                        )
        elif subs is not None:
            if PLACEHOLDER.match(word):
                break
            if word not in subs:
                problems.append(f"`{' '.join(path)}` has no command {word}")
                break
            group, command = command, subs[word]
            path.append(word)
        i += 1
    if (
        getattr(command, "commands", None) is not None
        and command is not ROOT
        and len(path) == 2
        and not alternatives
        and not words[1:]
    ):
        problems.append(f"`{' '.join(path)}` is a group: the page names no command of it")
    for alternative in alternatives:  # `| activate v2 | rollback`: siblings of the last command
        first = (tokens(alternative) or [""])[0]
        if first and first not in getattr(group, "commands", {}):
            problems.append(f"`{' '.join(path[:-1])}` has no command {first}")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_every_oomrl_command_and_option_the_page_shows_exists(page: str) -> None:
    shown = list(invocations(PAGES[page]))
    assert len(shown) > 10, "the parser found no commands: the page's format changed"
    problems = [f"{text!r}: {problem}" for text in shown for problem in check_invocation(text)]
    assert not problems, "\n".join(problems)


def every_option() -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}

    def walk(command: Any) -> None:
        for opt, param in params(command).items():
            found.setdefault(opt, []).append(param)
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(ROOT)
    return found


# Options of other programs the pages show (prefect, docker, pytest, the benchmark harness).
FOREIGN_OPTIONS = {
    "--no-prompt",
    "--all",
    "--build",
    "--scale",
    "--type",
    "--base-job-template",
    "--pin",
    "--collect-only",
    "--cov",
    "--cov-branch",
}


@pytest.mark.parametrize("page", PAGES)
def test_every_option_named_alone_is_an_option_of_oomrl_with_its_choices(page: str) -> None:
    """`--wait S`, `--lock docker`, `--max-repairs 2`...: options the prose names without a
    command."""
    options = every_option()
    problems = []
    for span in spans(PAGES[page]):
        words = tokens(span)
        if not words or not words[0].startswith("--") or words[0] in FOREIGN_OPTIONS:
            continue
        name = words[0].split("=")[0]
        if name not in options:
            problems.append(f"{span!r}: no oomrl command has {name}")
            continue
        value = words[1] if len(words) > 1 else ""
        allowed = {c for p in options[name] for c in choices_of(p)}
        if allowed and value and not PLACEHOLDER.match(value) and value not in allowed:
            problems.append(f"{span!r}: {value} is not one of {sorted(allowed)}")
    assert not problems, "\n".join(problems)


# --- settings ------------------------------------------------------------------------------------


@cache
def settings_defaults() -> dict[str, Any]:
    """OOMRL_* variable -> default, for every field of the pydantic settings classes."""
    from oomrl.settings import variables

    return {
        variable: None if field.default_factory else field.default
        for variable, field in variables().items()
    }


# Variables no code reads, and why a page names them.
NOT_READ_BY_CODE = {
    "OOMRL_TEST_POSTGRES_URL": "tests/",  # the end-to-end and PostgreSQL tests read it
    "OOMRL_WEBHOOK_URL": "tests/e2e/stacks.py",  # the page's shell example reads it
}


@pytest.mark.parametrize("page", PAGES)
def test_every_oomrl_variable_the_page_names_is_read(page: str) -> None:
    named = set(re.findall(r"\bOOMRL_[A-Z0-9_]*[A-Z0-9]\b", PAGES[page]))
    assert named
    unread = []
    for variable in sorted(named):
        if variable in settings_defaults() or re.search(rf"\b{variable}\b", CODE):
            continue
        where = REPO / NOT_READ_BY_CODE.get(variable, "-")
        files = (
            sorted(where.rglob("*.py")) if where.is_dir() else [where] if where.is_file() else []
        )
        if any(variable in file.read_text(encoding="utf-8", errors="replace") for file in files):
            continue
        unread.append(variable)
    assert not unread, f"{page} names variables nothing reads: {unread}"


def stated_default(text: str) -> Any:
    """The value a page gives in `(20 %)`, `(default 5)`, `(\\`false\\`)`, `(256 KiB)`, `(unset:
    ...)`."""
    text = text.strip()
    if text.startswith(("unset", "where seen")):
        return None
    text = re.sub(r"^default:?\s*", "", text).split(",")[0].split(";")[0].strip()
    if quoted := re.fullmatch(r"`([^`]*)`", text):
        value = quoted.group(1)
        return {"false": False, "true": True}.get(value, value)
    if kib := re.fullmatch(r"([\d,]+) KiB", text):
        return int(kib.group(1).replace(",", "")) * 1024
    if percent := re.fullmatch(r"([\d.]+) %", text):
        return round(float(percent.group(1)) / 100, 6)
    return float(text.replace(",", ""))


def stated_defaults() -> list[tuple[str, str, str]]:
    return [
        (page, variable, value)
        for page, text in PAGES.items()
        for variable, value in re.findall(r"`(OOMRL_[A-Z0-9_]+)`(?: sessions)? \(([^)]*)\)", text)
        if (variable in settings_defaults() or variable == "OOMRL_HOME")
        and not value.startswith("required")
    ]


@pytest.mark.parametrize(
    ("page", "variable", "value"),
    stated_defaults(),
    ids=[f"{p}:{v}" for p, v, _ in stated_defaults()],
)
def test_the_default_a_page_states_for_a_variable_is_the_codes(
    page: str, variable: str, value: str
) -> None:
    if variable == "OOMRL_HOME":
        from oomrl.settings import StoreSettings

        factory = StoreSettings.model_fields["home"].default_factory
        assert factory is not None
        assert Path(str(stated_default(value))).expanduser() == factory(), value  # type: ignore[call-arg]
        return
    assert stated_default(value) == settings_defaults()[variable], f"{page}: {variable} ({value})"


def test_the_webhook_examples_default_address_is_the_webhooks_port() -> None:
    default = figure(OPERATIONS, r"`OOMRL_WEBHOOK_URL` \(default `([^`]+)`\)")
    assert "${OOMRL_WEBHOOK_URL:-" + default + "}" in OPERATIONS
    assert default.endswith(
        f":{params(ROOT.commands['webhook'].commands['serve'])['--port'].default}"
    )


# --- figures the code keeps as constants ---------------------------------------------------------


def _flow_constant(name: str, source: str = "flows/repair.py") -> Any:
    """A module-level constant or a `repair` flow default of `source` (flows/repair.py), read
    without Prefect."""
    tree = ast.parse((REPO / source).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
        if isinstance(node, ast.FunctionDef) and node.name == "repair":
            args = node.args.args[-len(node.args.defaults) :]
            for arg, default in zip(args, node.args.defaults, strict=True):
                if arg.arg == name:
                    return ast.literal_eval(default)
    raise LookupError(name)


def _imported(module: str, name: str) -> Callable[[], Any]:
    return lambda: getattr(importlib.import_module(module), name)


# (claim, page, pattern whose group is the figure, the code's value, how the figure reads as that
# value)
FIGURES: list[tuple[str, str, str, Callable[[], Any], Callable[[str], Any]]] = [
    (
        "webhook timestamp tolerance",
        OPERATIONS,
        r"timestamp more than (\d+) s away",
        lambda: settings_defaults()["OOMRL_WEBHOOK_TOLERANCE_S"],
        int,
    ),
    (
        "webhook secret minimum",
        OPERATIONS,
        r"`OOMRL_WEBHOOK_SECRET` \(required, ≥ (\d+) characters",
        _imported("oomrl.settings", "MIN_SECRET_LENGTH"),
        int,
    ),
    (
        "alertmanager token minimum",
        OPERATIONS,
        r"when that variable is set, at least (\d+) characters",
        _imported("oomrl.settings", "MIN_SECRET_LENGTH"),
        int,
    ),
    (
        "429 Retry-After",
        OPERATIONS,
        r"429 \(`Retry-After: (\d+)`\)",
        _imported("oomrl.webhook.app", "RATE_WINDOW_S"),
        float,
    ),
    (
        "503 Retry-After",
        OPERATIONS,
        r"\(`Retry-After: (\d+)`\), or another delivery",
        _imported("oomrl.repair.claims", "CLAIM_SILENT_S"),
        float,
    ),
    (
        "a silent claim",
        OPERATIONS,
        r"`beat_at` is older than (\d+) s",
        _imported("oomrl.repair.claims", "CLAIM_SILENT_S"),
        float,
    ),
    (
        "the claim's beat",
        OPERATIONS,
        r"beats `beat_at` every (\d+) s",
        _imported("oomrl.repair.claims", "CLAIM_BEAT_S"),
        float,
    ),
    (
        "a dead launch's claim taken over",
        OPERATIONS,
        r"taken over after (\d+) s",
        lambda: importlib.import_module("oomrl.webhook.app").LAUNCH_WAIT.total_seconds(),
        float,
    ),
    (
        "Prefect's 503 retried",
        OPERATIONS,
        r"Prefect answering 503 is retried for (\d+) s",
        lambda: sum(importlib.import_module("oomrl.webhook.launch").BUSY_RETRIES_S),
        float,
    ),
    (
        "the flow's claim wait",
        OPERATIONS,
        r"the flow (\d+) h;",
        lambda: importlib.import_module("oomrl.repair.claims").CLAIM_WAIT_S / 3600,
        float,
    ),
    (
        "oomrl repair --wait default",
        OPERATIONS,
        r"`oomrl repair --wait S`, default (\d+)",
        lambda: params(ROOT.commands["repair"])["--wait"].default,
        float,
    ),
    (
        "oomrl ingest --wait default",
        OPERATIONS,
        r"`oomrl ingest --wait S` seconds \(default (\d+)\)",
        _imported("oomrl.data.lock", "DEFAULT_WAIT_S"),
        float,
    ),
    (
        "store writer wait (README)",
        README,
        r"A second writer waits (\d+) s by default",
        _imported("oomrl.data.lock", "DEFAULT_WAIT_S"),
        float,
    ),
    (
        "ingests whose quarantine is kept",
        README,
        r"Quarantined rows of the last (\d+) ingests",
        _imported("oomrl.data.catalog", "MAX_INGEST_RECORDS"),
        int,
    ),
    (
        "approval timeout",
        OPERATIONS,
        r"`approval_timeout_s` \(default (\d+) s\)",
        lambda: _flow_constant("approval_timeout_s"),
        int,
    ),
    (
        "approval timeout (README)",
        README,
        r"as long as its timeout \((\d+) h;",
        lambda: _flow_constant("approval_timeout_s") / 3600,
        float,
    ),
    (
        "Prefect's pause deadline later",
        OPERATIONS,
        r"pause deadline is set (\d+) s later",
        lambda: _flow_constant("PAUSE_GRACE_S", "orchestration/review.py"),
        int,
    ),
    (
        "pause poll",
        OPERATIONS,
        r"polls every (\d+) s for the answer",
        lambda: _flow_constant("PAUSE_POLL_S", "orchestration/review.py"),
        float,
    ),
    (
        "autopsy and body size",
        README,
        r"exceeds (\d+) KiB",
        lambda: importlib.import_module("oomrl.repair.inputs").MAX_AUTOPSY_BYTES / 1024,
        float,
    ),
    (
        "first XSHG session",
        OPERATIONS,
        r"`as_of` before (\d{4}-\d\d-\d\d), the first XSHG session",
        lambda: str(importlib.import_module("oomrl.repair.inputs").FIRST_SESSION),
        str,
    ),
    (
        "account name length",
        README,
        r"accounts at most (\d+) characters",
        _imported("oomrl.names", "ACCOUNT_MAX"),
        int,
    ),
    (
        "account name length (webhook)",
        OPERATIONS,
        r"an account over (\d+) characters",
        _imported("oomrl.names", "ACCOUNT_MAX"),
        int,
    ),
    ("alert id length", README, r"alert ids (\d+),", _imported("oomrl.names", "ALERT_ID_MAX"), int),
    (
        "strategy name length",
        README,
        r"strategy names (\d+);",
        _imported("oomrl.names", "STRATEGY_MAX"),
        int,
    ),
    (
        "config file size",
        OPERATIONS,
        r"larger than (\d+) MiB",
        lambda: importlib.import_module("oomrl.settings").MAX_CONFIG_BYTES / 2**20,
        float,
    ),
    (
        "initial cash bound",
        OPERATIONS,
        r"`OOMRL_INITIAL_CASH` over 10(¹²) CNY",
        lambda: (
            "¹²"
            if (
                importlib.import_module("oomrl.settings")
                .LedgerSettings.model_fields["initial_cash"]
                .metadata[-1]
                .le
                == 1e12
            )
            else "?"
        ),
        str,
    ),
    (
        "synthetic symbols",
        OPERATIONS,
        r"`--source synthetic:N` beyond ([\d,]+) symbols",
        _imported("oomrl.data.sources.synthetic", "MAX_SYMBOLS"),
        lambda s: int(s.replace(",", "")),
    ),
    (
        "gamma",
        README,
        r"calibrated from the impact model \((\d\.\d) × 10⁻⁴\)",
        lambda: round(importlib.import_module("oomrl.portfolio.reward").DEFAULT_GAMMA * 1e4, 1),
        float,
    ),
    (
        "P_terminal",
        README,
        r"−P_terminal \((\d\.\d)\)",
        _imported("oomrl.portfolio.reward", "DEFAULT_TERMINAL_PENALTY"),
        float,
    ),
    (
        "account LLM tokens",
        README,
        r"LLM budget in the ledger \((\d+) M tokens",
        lambda: settings_defaults()["OOMRL_AGENT_ACCOUNT_MAX_TOKENS"] / 1e6,
        float,
    ),
    (
        "account LLM dollars",
        README,
        r"M tokens / \$(\d+) when first",
        lambda: settings_defaults()["OOMRL_AGENT_ACCOUNT_MAX_COST_USD"],
        float,
    ),
    (
        "gate sandbox uid",
        README,
        r"sandbox as uid (\d+)",
        _imported("guardrails.sandbox.bwrap", "SANDBOX_UID"),
        int,
    ),
    (
        "sample clock day one",
        OPERATIONS,
        r"`up` gives its children `OOMRL_SAMPLE_CLOCK=(\d{4}-\d\d-\d\d)`",
        lambda: str(importlib.import_module("oomrl.data.sample_clock").DAY_ONE),
        str,
    ),
    (
        "sample clock day one (README)",
        README,
        r"plays the bundled sample forward from (\d{4}-\d\d-\d\d)",
        lambda: str(importlib.import_module("oomrl.data.sample_clock").DAY_ONE),
        str,
    ),
    (
        "Prefect server port",
        OPERATIONS,
        r"`prefect server start` on 127\.0\.0\.1:(\d+)",
        lambda: params(ROOT.commands["server"].commands["up"])["--port"].default,
        int,
    ),
    (
        "webhook port",
        OPERATIONS,
        r"the webhook on 127\.0\.0\.1:(\d+)",
        lambda: params(ROOT.commands["server"].commands["up"])["--webhook-port"].default,
        int,
    ),
    (
        "demo's repair limit",
        README,
        r"`no more repairs: --max-repairs (\d+) reached",
        lambda: params(ROOT.commands["demo"])["--max-repairs"].default,
        int,
    ),
    (
        "demo's probation",
        README,
        r"`--probation (\d+)`, the default",
        lambda: params(ROOT.commands["demo"])["--probation"].default,
        int,
    ),
    (
        "worker image uid",
        OPERATIONS,
        r"`oomrl` \(uid (\d+)\)",
        lambda: int(
            figure(
                (REPO / "infra" / "Dockerfile").read_text(encoding="utf-8"),
                r"useradd .*?--uid (\d+)",
            )
        ),
        int,
    ),
    (
        "pytest timeout",
        README,
        r"(\d+) s per test unless a test sets its own",
        lambda: tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"][
            "ini_options"
        ]["timeout"],
        int,
    ),
]


@pytest.mark.parametrize(
    ("claim", "page", "pattern", "value", "read"), FIGURES, ids=[f[0] for f in FIGURES]
)
def test_a_figure_the_page_states_is_the_codes(
    claim: str, page: str, pattern: str, value: Callable[[], Any], read: Callable[[str], Any]
) -> None:
    assert read(figure(page, pattern)) == value(), claim


def test_the_state_names_a_repair_ends_in_are_the_codes() -> None:
    from oomrl.repair.endings import FAILED_STATE_NAMES

    section = OPERATIONS.split("### How a repair run ends", 1)[1].split("\n\n", 2)[1]
    named = {
        name
        for line in section.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([^`]+)`", line.split("|")[1])
    }
    assert named == {
        "On probation",
        "Promoted",
        "Rejected",
        "Failed",
        "Crashed",
        *FAILED_STATE_NAMES.values(),
    }


# --- messages the pages quote --------------------------------------------------------------------

# (the quote as a page writes it, the fragments of the code that print it)
QUOTES = [
    (
        OPERATIONS,
        "recovered: an earlier write by pid N ... did not finish",
        [
            "an earlier write by {describe(self.interrupted)} did not finish",
            'typer.echo(f"recovered: {note}")',
        ],
    ),
    (
        OPERATIONS,
        "recovered: repairs that were killed left ...",
        ["recovered: repairs that were killed left %s"],
    ),
    (
        OPERATIONS,
        "recovered: the promotion of vN ... rolled it back",
        ["recovered: the promotion of {journal.tag}", "rolled it back"],
    ),
    (
        OPERATIONS,
        "no heartbeat for 120 s: its process is gone; the alert was delivered again",
        [
            "no heartbeat for {CLAIM_SILENT_S:.0f} s: its process is ",
            "gone; the alert was delivered again",
        ],
    ),
    (
        OPERATIONS,
        "no decision within N s: a timeout rejects",
        ["no decision within {timeout_s} s: a timeout rejects"],
    ),
    (OPERATIONS, "resumed without an answer", ["resumed without an answer"]),
    (OPERATIONS, "promoted while this repair waited", ["promoted while this repair waited"]),
    (
        OPERATIONS,
        "another `oomrl server up` (pid N, since T) is starting the stack in HOME",
        [
            "another `oomrl server up` ({holder}) is starting the stack in {config.home}",
            "pid {os.getpid()}, since ",
        ],
    ),
    (
        OPERATIONS,
        "error: repair ended Account busy at claim: account paper is being repaired by run "
        "cli-... (pid 123",
        [
            'raise OomrlError(f"repair ended {ending} at {outcome.step}: {outcome.reason}")',
            '"claim": "Account busy"',
            "account {account} is being repaired by {holder.describe()}; {waited}",
            '"not waiting (wait is 0)"',
            'return f"pid {self.pid} on {self.host}"',
            'ctx, "cli", wait_s=wait',
        ],
    ),
    (
        OPERATIONS,
        "Engine execution exited with unexpected exception",
        ['ENGINE_EXIT = "Engine execution exited with unexpected exception"'],
    ),
    (
        README,
        "no more repairs: --max-repairs 2 reached",
        ["no more repairs[/]: --max-repairs {config.max_repairs} reached"],
    ),
]


@pytest.mark.parametrize(("page", "quote", "fragments"), QUOTES, ids=[q[1][:40] for q in QUOTES])
def test_a_message_the_page_quotes_is_printed_by_the_code(
    page: str, quote: str, fragments: list[str]
) -> None:
    assert quote in " ".join(page.split()), (
        f"the page no longer quotes {quote!r}: update this test with it"
    )
    missing = [fragment for fragment in fragments if fragment not in CODE]
    assert not missing, f"{quote!r}: the code no longer prints it ({missing})"


def prefect_root() -> Path:
    """The installed prefect package, found without importing it."""
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def prefect_source(relative: str) -> str:
    return (prefect_root() / relative).read_text(encoding="utf-8")


def test_what_the_page_says_of_prefects_sqlite_and_client_retries() -> None:
    timeout = figure(OPERATIONS, r"`PRAGMA busy_timeout = (\d+)`")
    assert f"PRAGMA busy_timeout = {timeout};" in prefect_source(
        "server/database/configurations.py"
    )
    retries = figure(OPERATIONS, r"Prefect's clients retry \((\d+) times")
    first, last = figure(OPERATIONS, r"(\d+ to \d+) s apart").split(" to ")
    assert re.search(
        rf"max_retries: int = Field\(\s*default={retries}\b",
        prefect_source("settings/models/client.py"),
    )
    assert "retry_seconds = 2**try_count" in prefect_source("client/base.py")
    assert (int(first), int(last)) == (2**1, 2 ** int(retries))
    assert any(
        "Engine execution exited with unexpected exception" in p.read_text(encoding="utf-8")
        for p in prefect_root().rglob("*engine*.py")
    ), "the ERROR record tasks/expected_ends.py filters"


# --- exit codes ----------------------------------------------------------------------------------


def bad_settings_examples() -> list[str]:
    """The `VAR=value` examples of the sentences that say a bad setting stops a command."""
    readme = figure(README, r"(Every setting is validated when it is read:.*?stops the command)")
    operations = figure(
        OPERATIONS, r"(Settings are checked when read:.*?that is not a column mapping)"
    )
    return sorted(
        {
            example
            for text in (readme, operations)
            for example in re.findall(r"`(OOMRL_[A-Z_]+=[^`\s]+)`", " ".join(text.split()))
        }
    )


@pytest.mark.parametrize("example", bad_settings_examples())
def test_a_bad_setting_the_pages_name_stops_a_command_with_one_line_and_exit_1(
    example: str, tmp_path: Path
) -> None:
    variable, value = example.split("=", 1)
    home = tmp_path / "home"
    result = CliRunner().invoke(
        app, ["account", "show"], env={"OOMRL_HOME": str(home), variable: value}
    )
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    assert (
        variable in result.output or value in result.output
    ) and "Traceback" not in result.output, "named"
    assert not home.exists(), "nothing written"


def test_a_usage_error_is_exit_2_as_the_pages_say(tmp_path: Path) -> None:
    assert "exit 1 (2 for a usage error such as `--account ''`)" in " ".join(OPERATIONS.split())
    assert "exit 1 (2 for a usage error)" in " ".join(README.split())
    result = CliRunner().invoke(
        app, ["account", "show", "--account", ""], env={"OOMRL_HOME": str(tmp_path / "h")}
    )
    assert result.exit_code == 2 and not (tmp_path / "h").exists(), result.output


def test_the_gates_exit_codes_are_the_pages() -> None:
    from guardrails.cli import EXIT_ACCEPTED, EXIT_REJECTED, EXIT_SETUP

    codes = figure(README, r"oomrl gate --workspace DIR .*?# exit (\d / \d / \d)")
    assert codes == f"{EXIT_ACCEPTED} / {EXIT_REJECTED} / {EXIT_SETUP}"
    missing = CliRunner().invoke(
        app,
        [
            "gate",
            "--workspace",
            "/nonexistent",
            "--phase",
            "code-patch",
            "--patch",
            "/nonexistent.diff",
        ],
    )
    assert missing.exit_code == EXIT_SETUP, missing.output


# --- paths and anchors ---------------------------------------------------------------------------

TOP_LEVEL = {p.name for p in REPO.iterdir() if not p.name.startswith(".") or p.name == ".ci"} - {
    "data"
}
PATH_TOKEN = re.compile(r"^[\w.-]+(/[\w.*<>-]*)*(:\w+)?$")


def repo_paths(page: str) -> set[str]:
    """Tokens of the page's code that name something in the repository (its first folder is one of
    the repository's; `data/` is OOMRL_HOME's, except `data/sample`)."""
    found = set()
    for code in all_code(page):
        for raw in code.split():
            token = raw.strip("()[],;`'\"").rstrip(".")
            first = token.split("/")[0].split(":")[0]
            if PATH_TOKEN.match(token) and (
                first in TOP_LEVEL
                and ("/" in token or "." in first)
                or token.startswith("data/sample")
            ):
                found.add(token)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_repository_path_the_page_names_exists(page: str) -> None:
    named = repo_paths(PAGES[page])
    assert len(named) > 10
    missing = []
    for token in sorted(named):
        path, _, function = token.partition(":")
        if "*" in path or "<" in path:
            continue
        if not (REPO / path).exists():
            missing.append(token)
        elif function:
            tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
            if function not in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}:
                missing.append(token)
    assert not missing, f"{page} names what the repository lacks: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES)
def test_every_link_of_the_page_resolves(page: str) -> None:
    base = (REPO / page).parent
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", PAGES[page]):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        path = (base / file) if file else REPO / page
        if not path.exists():
            broken.append(target)
        elif anchor:
            headings = re.findall(
                r"^#+ (.+)$", FENCE.sub("", path.read_text(encoding="utf-8")), re.M
            )
            if anchor not in {slug(h) for h in headings}:
                broken.append(target)
    assert not broken, f"{page}: links to nothing: {broken}"


def test_the_layout_names_the_repositorys_folders_and_the_cores_modules() -> None:
    block = figure(README, r"### Layout\s+```\n(.*?)```")
    folders = [line.split()[0] for line in block.splitlines() if line and not line.startswith(" ")]
    assert all((REPO / folder).is_dir() for folder in folders), folders
    core = figure(README, r"oomrl/ +domain core, importable without Prefect: (.*?)\n\w")
    for name in (n.strip() for n in " ".join(core.split()).split(",")):
        assert (REPO / "oomrl" / name).exists() or (REPO / "oomrl" / f"{name}.py").exists(), name


def test_oomrl_home_holds_what_the_readme_lists(tmp_path: Path) -> None:
    from oomrl.settings import get_settings

    block = figure(README, r"`OOMRL_HOME` \(default `~/.oomrl`\) holds:\s+```\n(.*?)```")
    settings = get_settings(store={"home": tmp_path}, ledger={"url": None})
    layout = {
        "data/": settings.store.data_dir,
        "workspace/": settings.store.workspace_dir,
        "runs/": settings.store.runs_dir,
    }
    for line in block.splitlines():
        name = line.split()[0]
        if name in layout:
            assert layout[name] == tmp_path / name.rstrip("/"), name
        else:
            assert settings.ledger_url.endswith(f"/{name}"), (name, settings.ledger_url)


# --- make, CI, deployments -----------------------------------------------------------------------

MAKEFILE = (REPO / "Makefile").read_text(encoding="utf-8")


def recipe(target: str) -> str:
    return figure(MAKEFILE, rf"(?m)^{target}:[^\n]*\n((?:\t[^\n]*\n)+)")


def test_the_make_targets_do_what_the_readme_says() -> None:
    overall, floors = (
        figure(README, r"branch coverage >= (\d+) %"),
        figure(README, r"overall, >= (\d+) % for guardrails/"),
    )
    test = recipe("test")
    assert f"--cov-fail-under={overall}" in test and "--cov-branch" in test
    assert (
        test.count(f" --fail-under={floors}") == 2
        and "guardrails/*" in test
        and "strategies/*" in test
    )
    assert "oomrl demo" in recipe("demo") and "oomrl server up" in recipe("server")
    assert "oomrl server down" in recipe("server-down")
    check = recipe("check")
    marker = " ".join(figure(README, r'--collect-only -q -m "(not slow and not e2e)"').split())
    assert f'-m "{marker}"' in check and "-n 2" in check and "-u OOMRL_TEST_POSTGRES_URL" in check
    assert re.search(r"(?m)^check: lint types", MAKEFILE) and "ruff check" in recipe("lint")
    assert "mypy" in recipe("types")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "`.ci/run` runs `make lint types`, then `make test`" in README
    assert ci.index("make lint types") < ci.index("make test")


def test_the_readme_names_the_folders_mypy_and_ruff_check() -> None:
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    named = figure(README, r"mypy on\s+(.*?) \(`\[tool\.mypy\] files`")
    assert sorted(re.findall(r"`(\w+)/`", named)) == sorted(tool["mypy"]["files"])
    families = {
        "E4": "pycodestyle errors",
        "E5": "line length",
        "E7": "pycodestyle errors",
        "E9": "pycodestyle errors",
        "F": "pyflakes",
        "B": "bugbear",
        "UP": "pyupgrade",
        "I": "isort",
        "SIM": "simplify",
        "PIE": "pie",
        "G": "logging",
        "LOG": "logging",
        "TID": "tidy imports",
        "PGH": "pygrep hooks",
        "PLE": "pylint errors",
        "A": "builtins",
        "FLY": "flynt",
        "T10": "debugger",
        "EXE": "executable",
        "YTT": "2020",
        "BLE": "blind except",
        "S102": "bandit's exec and try-except-pass",
        "S110": "bandit's exec and try-except-pass",
        "S112": "bandit's exec and try-except-pass",
        "RUF100": "unused noqa",
    }
    listed = figure(README, r"ruff \(([^)]*)\)")
    assert {families[code] for code in tool["ruff"]["lint"]["select"]} == {
        n.strip() for n in listed.split(",")
    }


def cron_text(cron: str) -> str:
    minute, hour, _, _, days = cron.split()
    names = {"1-5": "Mon–Fri", "5": "Fri"}
    return f"{int(hour)}:{int(minute):02d} {names[days]}"


def test_the_deployments_table_is_prefect_yaml() -> None:
    deployments = {
        d["name"]: d for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]
    }
    rows = [
        [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        for line in OPERATIONS.split("## The loop on a schedule", 1)[1]
        .split("\n\n", 2)[1]
        .splitlines()
        if line.startswith("| `")
    ]
    assert {row[0] for row in rows} == set(deployments)
    for name, entrypoint, schedule, _ in rows:
        deployment = deployments[name]
        assert deployment["entrypoint"] == entrypoint, name
        crons = [s["cron"] for s in deployment.get("schedules") or []]
        if crons:
            assert schedule == f"{cron_text(crons[0])}, active" and all(
                s["active"] for s in deployment["schedules"]
            )
            at = rf"`{name}`\s+at\s+{cron_text(crons[0])}".replace(" ", r"\s+")
            assert re.search(at, README), (
                f"the README gives {name} another schedule than prefect.yaml"
            )
        elif deployment.get("triggers"):
            # Cell: its last ` stripped
            assert schedule == f"event `{deployment['triggers'][0]['expect'][0]}", name
        else:
            assert schedule == "on demand", name


def test_the_deployed_flows_have_no_flow_retries() -> None:
    assert "the deployed flows, every entrypoint of `prefect.yaml`, have `retries=0`" in " ".join(
        OPERATIONS.split()
    )
    for deployment in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]:
        file, function = deployment["entrypoint"].split(":")
        tree = ast.parse((REPO / file).read_text(encoding="utf-8"))
        (node,) = [
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function
        ]
        retries = [
            k.value
            for d in node.decorator_list
            if isinstance(d, ast.Call)
            for k in d.keywords
            if k.arg == "retries"
        ]
        assert [ast.literal_eval(r) for r in retries] == [0], deployment["entrypoint"]


# --- data figures --------------------------------------------------------------------------------


def test_the_red_team_totals_are_the_corpus() -> None:
    found = re.search(
        r"# (\d+)/\1 attacks blocked by their mechanism, (\d+)/\2 benign accepted", README
    )
    assert found, "the README's red-team line (N/N attacks blocked, M/M benign accepted)"
    attacks, benign = found.groups()
    with (REPO / "tests" / "guardrails" / "corpus" / "cases.csv").open(encoding="utf-8") as handle:
        outcomes = [row["outcome"] for row in csv.DictReader(handle)]
    assert (int(attacks), int(benign)) == (outcomes.count("blocked"), outcomes.count("accepted"))
    assert "attacks blocked: " in CODE and "benign accepted: " in CODE  # the lines redteam prints


def test_the_csi_300_figures_of_the_readme_are_the_fixtures() -> None:
    import pandas as pd

    fixtures = REPO / "tests" / "fixtures" / "metrics"
    close = pd.read_csv(
        fixtures / "csi300_price_2024-06_2026-03.csv", parse_dates=["date"]
    ).set_index("date")["close"]
    daily = close.pct_change()  # the first day's return from the previous session's close
    phases = pd.read_csv(fixtures / "table1_phases.csv")
    stated = figure(README, r"table1_phases\.csv +# ([\d. /]+) %")
    computed = " / ".join(
        f"{daily[row.start : row.end].mean() * 252 * 100:.2f}" for row in phases.itertuples()
    )
    assert stated == computed, "mean daily return × 252 per phase"
    rose = figure(
        README,
        r"the CSI 300 price index rose ([\d.]+) % "
        r"from the 2024-07-01 close to the 2026-02-27 close",
    )
    assert f"{(close['2026-02-27'] / close['2024-07-01'] - 1) * 100:.1f}" == rose
