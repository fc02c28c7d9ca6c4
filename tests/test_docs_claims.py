"""The checkable claims of docs/{gate,metrics,data,portfolio,agent,architecture,INTERFACES}.md hold.

Every check reads the figure or name from the page at test time and compares it with the code, so
the test fails when either side changes: repository paths and the tests named exist, dotted names
and their keyword arguments resolve, `oomrl` commands and options exist, settings and env vars are
real, and the figures the code keeps as constants (fees, limits, thresholds, defaults, corpus
counts) match. Offline, no Prefect import (tasks/ and flows/ are read as source), a few seconds.

Test counts are not written in the docs: count them with
`.venv/bin/python -m pytest --collect-only -q -p no:cacheprovider [PATH] | tail -1`."""

from __future__ import annotations

import ast
import builtins
import csv
import importlib
import inspect
import json
import re
import sys
import textwrap
from collections import Counter
from dataclasses import fields
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = ("gate", "metrics", "data", "portfolio", "agent", "architecture", "INTERFACES")
TOP_DIRS = (
    "oomrl/",
    "guardrails/",
    "tests/",
    "strategies/",
    "strategy_api/",
    "strategy_host/",
    "orchestration/",
    "flows/",
    "tasks/",
    "schemas/",
    "scripts/",
    "bench/",
    "data/sample/",
    "infra/",
    "docs/",
)
# Paths the pages name that are not files of this tree, with the reason.
NOT_IN_THIS_TREE = {
    "strategies/base.py": "the base module of versions committed before strategy_api"
}
# Where a page writes a module-relative name (`calendar.sessions` in "Market facts
# (oomrl/market/)").
PREFIXES = (
    "",
    "oomrl.",
    "oomrl.market.",
    "oomrl.data.",
    "oomrl.portfolio.",
    "oomrl.metrics.",
    "oomrl.diagnostics.",
    "oomrl.agent.",
    "oomrl.webhook.",
    "oomrl.repair.",
    "oomrl.ops.",
    "oomrl.ops.commands.",
    "orchestration.",
    "guardrails.",
    "guardrails.patch.",
    "guardrails.static.",
    "guardrails.sandbox.",
    "guardrails.child.",
    "guardrails.judging.",
    "strategy_host.",
    "strategy_api.",
)
# Instance names the pages use for an object of a class (`tx.discard`, `ctx.claim_wait_s`).
INSTANCES = {
    "registry": "strategies.registry",
    "ctx": "oomrl.repair.context.RepairContext",
    "tx": "oomrl.data.store.StoreTransaction",
    "budget": "oomrl.agent.budget.Budget",
    "runner": "oomrl.portfolio.hosting.HostedRunner",
    "settings": "oomrl.settings.OomrlSettings",
    "store": "oomrl.data.store.MarketStore",
    "ledger": "oomrl.portfolio.ledger.Ledger",
}
# Dotted names of other trees or of data, each with the file that shows it.
ELSEWHERE = {
    "strategies.momentum": (
        "tests/guardrails/corpus/workspaces/buggy/strategies/momentum.py",
        "def target_weights",
    ),
    "genpkg.m": ("bench/bench_gate.py", "genpkg"),  # the generated workspace's modules m<i>
    "sanitizer.test_env": (
        "docs/gate.md",
        "instead of `sanitizer.test_env`",
    ),  # a former rule, named so
    "locks.before": ("guardrails/verdict.py", "before"),  # fields of the verdict's JSON
    "locks.after": ("guardrails/verdict.py", "after"),
    "diagnostics.module": (
        "oomrl/diagnostics/autopsy.py",
        "module:",
    ),  # a field of the autopsy's JSON
    "orders.unfilled": (
        "oomrl/portfolio/ledger_tables.py",
        "unfilled",
    ),  # a column of the orders table
    "tool.oomrl.guard": (
        "guardrails/workspace.py",
        '"guard"',
    ),  # TOML tables of the gate's contract
    "tool.oomrl.guard.behaviour": ("guardrails/workspace.py", '"behaviour"'),
}
PROSE_SUFFIXES = (
    ".md",
    ".csv",
    ".json",
    ".toml",
    ".diff",
    ".db",
    ".cpp",
    ".txt",
    ".yaml",
    ".py",
    ".lock",
)
CODE_ROOTS = (
    "oomrl",
    "orchestration",
    "guardrails",
    "strategy_api",
    "strategy_host",
    "strategies",
    "tasks",
    "flows",
)


@cache
def page(name: str) -> str:
    return (REPO / "docs" / f"{name}.md").read_text(encoding="utf-8")


def prose(name: str) -> str:
    """The page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", page(name), flags=re.S | re.M)


def spans(name: str) -> list[str]:
    """The inline code spans of a page (outside fenced blocks)."""
    return re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", prose(name))


def figure(text: str) -> float:
    """A printed figure as a number: thousands separators, unicode minus and spaces undone."""
    return float(re.sub(r"[ ,_]", "", text.replace("−", "-")))


def find(name: str, pattern: str, flat: bool = True) -> re.Match[str]:
    """The first match of `pattern` on a page (its whitespace runs as one space, unless not `flat`);
    fails naming the page when the sentence changed."""
    found = re.search(pattern, re.sub(r"\s+", " ", page(name)) if flat else page(name), flags=re.S)
    assert found, f"docs/{name}.md no longer says /{pattern}/: keep this test with it"
    return found


@cache
def code_tree() -> dict[str, ast.Module]:
    """Module name -> its parsed source, for every package of the project (no import)."""
    modules = {}
    for root in CODE_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = ast.parse(path.read_text(encoding="utf-8"))
    return modules


@cache
def defined_names() -> dict[str, set[str]]:
    """Top-level name -> the modules that define it (class, function or assignment)."""
    index: dict[str, set[str]] = {}
    for module, tree in code_tree().items():
        for node in tree.body:
            names = (
                [node.name]
                if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                else []
            )
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            for name in names:
                index.setdefault(name, set()).add(module)
    return index


@cache
def string_literals() -> frozenset[str]:
    """Every string constant in the project's code (rule names, event names, state names...)."""
    found = set()
    for tree in code_tree().values():
        found |= {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
    return frozenset(found)


def module_constants(module: str) -> dict[str, Any]:
    """The literal top-level assignments of a module, read from its source (tasks/ import
    Prefect)."""
    values = {}
    for node in code_tree()[module].body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return values


MEMBERS: dict[int, tuple[Any, set[str]]] = {}


def members(obj: Any) -> set[str]:
    """What `obj.<name>` may name: attributes, model and dataclass fields, and `self.<x>` its
    methods set."""
    if id(obj) not in MEMBERS:
        MEMBERS[id(obj)] = (obj, own_members(obj))  # the object is kept, so its id is never reused
    return MEMBERS[id(obj)][1]


def own_members(obj: Any) -> set[str]:
    found = set(dir(obj))
    for attribute in ("model_fields", "__dataclass_fields__", "__annotations__"):
        found |= set(getattr(obj, attribute, None) or {})
    if inspect.isclass(obj):
        for klass in obj.__mro__:
            if not project_object(klass):
                continue  # pydantic's or pandas' own classes: dir() has what they define
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
            except (OSError, TypeError, SyntaxError):
                continue
            found |= {
                node.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            }
    return found


FIELD = object()  # a field or an instance attribute: it exists, with no class-level value to follow
MISSING = object()  # what `resolve` gives for a name the code does not have


def attribute_path(obj: Any, names: list[str]) -> Any:
    for name in names:
        if obj is FIELD or name not in members(obj):
            raise AttributeError(name)
        field = getattr(obj, "model_fields", {}).get(name)
        if field is not None and inspect.isclass(field.annotation):  # a group of the settings
            obj = field.annotation
        else:
            obj = getattr(obj, name, FIELD)
    return obj


def project_object(obj: Any) -> bool:
    """True for a module, class or function of this project (not numpy's `np` imported into a
    module)."""
    where = (
        getattr(obj, "__name__", "")
        if inspect.ismodule(obj)
        else getattr(obj, "__module__", None) or ""
    )
    return where.split(".")[0] in CODE_ROOTS


@cache
def prefect_modules() -> frozenset[str]:
    """The modules whose source imports Prefect at its top (orchestration.review)."""
    return frozenset(
        module
        for module, tree in code_tree().items()
        for node in tree.body
        if (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "prefect")
        or (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] == "prefect" for a in node.names)
        )
    )


def source_only(dotted: str) -> bool:
    """Read from its source, never imported: tasks/, flows/ and any module that imports Prefect."""
    if dotted.split(".")[0] in ("tasks", "flows"):
        return True
    return any(dotted == m or dotted.startswith(m + ".") for m in prefect_modules())


def resolve(dotted: str) -> tuple[bool, Any]:
    """(known, object): known is False when nothing in the project starts this name (prose, not
    code)."""
    parts = dotted.split(".")
    if parts[0] == "prefect" or dotted.endswith(PROSE_SUFFIXES):
        return False, MISSING  # `prefect.yaml`, a file name: never imported
    if source_only(dotted):
        node = resolve_source(dotted)
        return True, MISSING if node is None else node
    candidates = [(prefix, prefix + dotted) for prefix in PREFIXES]
    homes = sorted(defined_names().get(parts[0], ()))
    candidates += [
        (f"{module}.", f"{module}.{dotted}") for module in homes if not source_only(module)
    ]
    if parts[0] in INSTANCES:
        # The class stands for the name
        candidates.append(("", ".".join([INSTANCES[parts[0]], *parts[1:]])))
    known = False
    for prefix, candidate in candidates:
        chain, given = candidate.split("."), prefix.count(".")
        for cut in range(len(chain), 0, -1):
            try:
                obj = importlib.import_module(".".join(chain[:cut]))
            except ImportError:
                continue
            # Only the prefix is a module: is the name's first part one of its own?
            if cut <= given:
                try:
                    head = attribute_path(obj, chain[cut : given + 1])
                except AttributeError:
                    break
                if head is not FIELD and not project_object(head):
                    break  # a library the module imported (np, pd): the name is not the project's
            known = True
            try:
                return True, attribute_path(obj, chain[cut:])
            except AttributeError:
                break
    for home in homes:
        if source_only(home):
            node = resolve_source(f"{home}.{dotted}")
            if node is not None:
                return True, node
            known = True
    return known, MISSING


def resolve_source(dotted: str) -> Any:
    """A name in orchestration/, tasks/ or flows/, found in their source:
    `orchestration.review.MandateReview.prefilled`."""
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        tree = code_tree().get(".".join(parts[:cut]))
        if tree is None:
            continue
        node: ast.AST | None = tree
        for name in parts[cut:]:
            body = getattr(node, "body", [])
            node = next((n for n in body if getattr(n, "name", None) == name), None)
        return node
    return None


# --- names and paths ------------------------------------------------------------------------------


def path_claims() -> list[tuple[str, str]]:
    claims = []
    for name in PAGES:
        for span in spans(name):
            token = span.split()[0] if span.split() else ""
            if token.startswith(TOP_DIRS) and not re.search(r"[<*{|$]", token):
                claims.append((name, token.rstrip(").,;")))
    return sorted(set(claims))


@pytest.mark.parametrize(("name", "claim"), path_claims())
def test_every_repository_path_the_docs_name_exists(name: str, claim: str) -> None:
    path, _, member = claim.partition(":")
    if path in NOT_IN_THIS_TREE:
        return
    assert (REPO / path).exists(), f"docs/{name}.md names {path}, which does not exist"
    member = member.lstrip(":")
    if member and path.endswith(".py"):
        tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
        defined = {getattr(node, "name", None) for node in ast.walk(tree)}
        defined |= {
            t.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        assert member.split("(")[0] in defined, (
            f"docs/{name}.md names {claim}: {path} has no {member}"
        )


@cache
def defined_tests() -> dict[str, set[str]]:
    """Test function name -> the test files that define it."""
    found: dict[str, set[str]] = {}
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.setdefault(node.name, set()).add(path.name)
    return found


@pytest.mark.parametrize("name", PAGES)
def test_every_test_and_test_file_the_docs_name_exists(name: str) -> None:
    test_files = {path.name for path in (REPO / "tests").rglob("test_*.py")}
    missing = []
    for span in spans(name):
        for file, test in re.findall(r"(?<![\w/])(test_\w+\.py)(?:::(test_\w+))?", span):
            if file not in test_files:
                missing.append(file)
            elif test and file not in defined_tests().get(test, set()):
                missing.append(f"{file}::{test}")
        missing += [
            test
            for test in re.findall(r"(?<![\w.:])(test_\w+)(?![\w.(,}])", span)
            if test not in defined_tests()
        ]
    assert not missing, f"docs/{name}.md names tests that do not exist: {missing}"


def dotted_claims(name: str) -> list[str]:
    chain = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
    return sorted({found for span in spans(name) for found in chain.findall(span)})


@pytest.mark.parametrize("name", PAGES)
def test_every_dotted_name_the_docs_give_resolves(name: str) -> None:
    before = set(sys.modules)
    unresolved = []
    for dotted in dotted_claims(name):
        if dotted in ELSEWHERE:
            path, evidence = ELSEWHERE[dotted]
            assert evidence in (REPO / path).read_text(encoding="utf-8"), (
                f"{dotted}: {path} has no {evidence}"
            )
            continue
        if dotted.endswith(PROSE_SUFFIXES + ("_",)) or dotted in string_literals():
            continue  # a file name, a wildcard (`tx.write_*`), or a rule, event or state name
        if any(literal.startswith(dotted + ".") for literal in string_literals()):
            continue  # a prefix of such names (`oomrl.account` of `oomrl.account.<id>`)
        known, obj = resolve(dotted)
        if known and obj is MISSING:
            unresolved.append(dotted)
    assert not unresolved, f"docs/{name}.md names what the code does not have: {unresolved}"
    imported = sorted(
        m for m in set(sys.modules) - before if m.split(".")[0] in ("prefect", "tasks", "flows")
    )
    assert not imported, (
        f"resolving the names of docs/{name}.md imported Prefect code: {imported[:5]}"
    )


def signature_claims() -> list[tuple[str, str, str]]:
    call = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\(([^()]*)\)")
    return sorted(
        {
            (name, dotted, args)
            for name in PAGES
            for span in spans(name)
            for dotted, args in call.findall(span)
        }
    )


def test_the_argument_names_the_docs_give_are_the_parameters() -> None:
    wrong = []
    for name, dotted, args in signature_claims():
        obj = resolve(dotted)[1]
        # Elsewhere a bare argument may be a value (`connect(fake)`)
        keywords_only = name != "INTERFACES"
        if obj is MISSING or isinstance(obj, ast.AST) or not callable(obj):
            continue
        try:
            parameters = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            continue
        for arg in (a.strip() for a in args.replace("\n", " ").split(",")):
            word = re.fullmatch(r"([a-z_]\w*)(\s*=.*)?", arg)
            if word and keywords_only and not word.group(2):
                continue
            if word and word.group(1) not in parameters:
                wrong.append(
                    f"docs/{name}.md: {dotted}({word.group(1)}) — parameters {list(parameters)}"
                )
    assert not wrong, "\n".join(wrong)


def test_the_flow_signatures_in_the_docs_are_the_flows() -> None:
    claims = re.findall(
        r"`flows/(\w+)\.py:(\w+)\(([^`]*?)\)`", page("INTERFACES").replace("\n  ", " ")
    )
    assert len(claims) >= 4, (
        "the flow signatures of docs/INTERFACES.md moved: keep this test with them"
    )
    for module, flow, args in claims:
        function = resolve_source(f"flows.{module}.{flow}")
        assert isinstance(function, ast.FunctionDef), f"flows/{module}.py has no {flow}"
        params = [a.arg for a in function.args.args]
        defaults = dict(
            zip(
                params[len(params) - len(function.args.defaults) :],
                function.args.defaults,
                strict=True,
            )
        )
        for arg in (a.strip() for a in args.split(",") if a.strip()):
            key, _, value = arg.partition("=")
            assert key in params, f"flows/{module}.py:{flow} has no parameter {key}"
            if value and key in defaults:
                assert ast.literal_eval(value) == ast.literal_eval(defaults[key]), f"{flow}({arg})"


def test_the_error_classes_the_docs_name_exist() -> None:
    named = {
        token
        for name in PAGES
        for span in spans(name)
        for token in re.findall(r"(?<![\w.])([A-Z]\w*Error)\b", span)
    }
    missing = sorted(n for n in named if n not in defined_names() and not hasattr(builtins, n))
    assert not missing, f"the docs name error classes nobody defines: {missing}"


def test_every_oomrl_env_var_the_docs_name_is_read_by_the_code() -> None:
    from oomrl.settings import variables

    named = {
        var for name in PAGES for var in re.findall(r"\bOOMRL_[A-Z0-9_]*[A-Z0-9]\b", page(name))
    }
    test_code = "".join(path.read_text(encoding="utf-8") for path in (REPO / "tests").rglob("*.py"))
    unknown = []
    for var in sorted(named):
        if any(var in literal for literal in string_literals()) or f'"{var}"' in test_code:
            continue
        if var not in variables():
            unknown.append(var)
    assert not unknown, f"env vars the docs name that no code or settings field reads: {unknown}"


# --- commands -------------------------------------------------------------------------------------


def command_lines() -> list[tuple[str, str]]:
    lines = []
    for name in PAGES:
        for block in re.findall(r"^```bash\n(.*?)^```", page(name), flags=re.S | re.M):
            lines += [(name, line) for line in block.replace("\\\n", " ").splitlines()]
        lines += [(name, span) for span in spans(name)]
    alternatives: list[
        tuple[str, str]
    ] = []  # `oomrl versions init | list | show v2`: one line per subcommand
    for name, line in lines:
        head = re.match(r"(oomrl [a-z]+) ", line)
        alternatives += (
            [
                (name, f"{head.group(1)} {alt}" if i else alt)
                for i, alt in enumerate(line.split(" | "))
            ]
            if head and " | " in line
            else [(name, line)]
        )
    lines = alternatives
    return [
        (name, re.sub(r"^\$ ", "", line.split("#")[0]).strip())
        for name, line in lines
        if re.match(r"(\$ )?oomrl [a-z]", line.strip())
    ]


def test_every_oomrl_command_and_option_in_the_docs_exists() -> None:
    import typer

    from oomrl.ops.commands import Benchmark, Lock, Provider
    from orchestration.cli import app

    choices = {"--lock": Lock, "--provider": Provider, "--benchmark": Benchmark}
    root = typer.main.get_command(app)
    wrong = []
    for name, line in command_lines():
        words = line.split()[1:]
        command: Any = root
        while words and getattr(command, "commands", None) and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        if getattr(command, "commands", None):
            if words and re.fullmatch(r"[a-z]+", words[0]):
                wrong.append(f"docs/{name}.md: `{line}`: no command {words[0]}")
            continue
        options = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
        for option, value in re.findall(r"(--[a-z][a-z-]*)(?:[ =]([\w|-]+))?", line):
            if option not in options:
                wrong.append(f"docs/{name}.md: `{line}`: no option {option}")
            elif "|" in value and option in choices and not (line.startswith("oomrl metrics")):
                extra = set(value.split("|")) - {c.value for c in choices[option]}
                if extra:
                    wrong.append(f"docs/{name}.md: `{line}`: {option} has no {sorted(extra)}")
    assert not wrong, "\n".join(wrong)


# --- figures the code keeps -----------------------------------------------------------------------


def test_the_gate_contract_defaults_are_the_code() -> None:
    from guardrails.workspace import GuardContract

    defaults = {f.name: f.default for f in fields(GuardContract)}
    contract = find(
        "gate", r"## Contract \(`\[tool.oomrl.guard\]` in DIR/pyproject.toml\) (.*?) ```toml"
    ).group(1)
    for key, value in re.findall(r"`(\w+)` \(([\d.]+)", contract):
        assert defaults[key] == float(value), f"docs/gate.md: {key} defaults to {value}"
    assert "coverage_min` (95)" in contract and defaults["coverage_min"] == 95
    assert f"coverage_min = {defaults['coverage_min']:g}" in page("architecture"), (
        "architecture §4.2 coverage_min"
    )


def test_the_gate_exit_codes_are_the_code() -> None:
    from guardrails.cli import EXIT_ACCEPTED, EXIT_REJECTED, EXIT_SETUP

    said = (EXIT_ACCEPTED, EXIT_REJECTED, EXIT_SETUP)
    for name in ("gate", "architecture"):
        found = find(
            name, r"[Ee]xit (\d) accepted, (\d) rejected, (\d) usage or infrastructure error"
        )
        assert tuple(map(int, found.groups())) == said, f"docs/{name}.md exit codes"


def test_the_gate_allow_lists_are_the_capabilities() -> None:
    from guardrails.static import capabilities

    stdlib = find("gate", r"pure-computation modules: `([^`]+)`").group(1).split()
    assert set(stdlib) == capabilities.PURE_STDLIB, "docs/gate.md: S's standard-library allow-list"
    libraries = re.findall(
        r"`(\w+)`", find("gate", r"typing_extensions`; (.*?); its own package").group(1)
    )
    assert set(libraries) == capabilities.LIBRARIES, "docs/gate.md: S's libraries"
    sys_names = re.findall(r"`(\w+)`", find("gate", r"`sys` for (.*?) only;").group(1))
    assert set(sys_names) == capabilities.RESTRICTED["sys"], (
        "docs/gate.md: the sys members S may read"
    )
    tests = re.findall(
        r"`(\w+)`", find("gate", r"own allow-list\s+\(adds (.*?) and T's own package").group(1)
    )
    assert set(tests) == capabilities.TEST_MODULES, "docs/gate.md: T's extra modules"


def test_the_strategy_host_requests_and_limits_are_the_host() -> None:
    from guardrails.sandbox.bwrap import SANDBOX_UID
    from guardrails.sandbox.strategyhost import STDERR_KEPT

    said = find("gate", r"Requests: (.*?)A test process's").group(1)
    while re.search(r"\([^()]*\)", said):
        said = re.sub(r"\([^()]*\)", "", said)
    requests = re.findall(r"`(\w+)`", said)
    serve = ast.parse((REPO / "strategy_host" / "serve.py").read_text(encoding="utf-8"))
    ops = {
        node.name.removeprefix("op_")
        for node in ast.walk(serve)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("op_")
    }
    assert set(requests) - {"init"} == ops and "init" in string_literals(), (
        "docs/gate.md: the host's requests"
    )
    assert int(find("gate", r"last (\d+) KB").group(1)) * 1024 == STDERR_KEPT, (
        "docs/gate.md: stderr kept"
    )
    for name in ("gate", "architecture"):
        assert f"uid {SANDBOX_UID}" in page(name).replace("uid\n", "uid "), (
            f"docs/{name}.md: the sandbox uid"
        )


def test_the_red_team_corpus_counts_are_the_corpus() -> None:
    corpus = REPO / "tests" / "guardrails" / "corpus"
    with (corpus / "cases.csv").open(encoding="utf-8") as cases:
        rows = list(csv.DictReader(cases))
    attacks = [row for row in rows if row["outcome"] == "blocked"]
    total, blocked, honest = map(
        int, find("gate", r"\*\*(\d+) cases: (\d+) attacks\*\*.*?\*\*and (\d+) honest").groups()
    )
    assert (total, blocked, honest) == (len(rows), len(attacks), len(rows) - len(attacks)), (
        "docs/gate.md corpus size"
    )
    by_mechanism = find("gate", r"Attacks by mechanism: (.*?)\. Eight toy").group(1)
    said = {mechanism: int(n) for mechanism, n in re.findall(r"(\w+) (\d+)", by_mechanism)}
    assert said == Counter(row["mechanism"] for row in attacks), "docs/gate.md attacks by mechanism"
    for prefix, header in (("j", r"\(`j\*`, (\d+) attacks\)"), ("v", r"\(`v\*`, (\d+) attacks\)")):
        group = [row for row in attacks if row["id"].startswith(prefix)]
        assert int(find("gate", header).group(1)) == len(group), f"docs/gate.md: {prefix}* attacks"
    j_list = find(
        "gate", r"each `.txt` saying what it tries and why it fails: (.*?) The two new"
    ).group(1)
    said = {m: int(n) for m, n in re.findall(r"(?:^|\. |\) )- (\w+) (\d+) —", j_list)}
    assert said == Counter(row["mechanism"] for row in attacks if row["id"].startswith("j")), (
        "j* by mechanism"
    )
    v_list = find("gate", r"had read it: (.*?)The \d+ honest patches").group(1)
    said = {m: int(n) for m, n in re.findall(r"(?:^|\), |: |, )(\w+) (\d+)\b", v_list)}
    assert said == Counter(row["mechanism"] for row in attacks if row["id"].startswith("v")), (
        "v* by mechanism"
    )
    v2_honest = int(find("gate", r"The (\d+) honest patches of\s+gate v2").group(1))
    assert v2_honest == len([r for r in rows if re.match(r"h(0\d|[12]\d|30)_", r["id"])]), (
        "gate v2 honest patches"
    )
    count, named = find("gate", r"(\w+) toy workspaces: (.*?) the strategy convention").groups()
    folders = {p.name for p in (corpus / "workspaces").iterdir()}
    assert count == "Eight" and len(folders) == 8, "docs/gate.md: eight toy workspaces"
    assert set(re.findall(r"`(\w+)`", named.split(" use the ")[0] + named.split(";")[1])) <= folders
    holdouts = find("gate", r"Held-out folders: (.*?)\. \*\*Written").group(1)
    assert set(re.findall(r"`(\w+)` \(", holdouts)) == {
        p.name for p in (corpus / "holdouts").iterdir()
    }


def test_the_verdict_json_shape_is_the_verdict_model() -> None:
    from guardrails.verdict import Verdict

    text = find("architecture", r"the verdict: `(\{.*?\})`\.").group(1)
    shape = json.loads(re.sub(r"(?<=: )[a-z]+(\|[a-z]+)*", '"x"', text))

    def keys(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, prop in schema.get("properties", {}).items():
            ref = prop.get("$ref") or prop.get("items", {}).get("$ref")
            out[key] = keys(defs[ref.rsplit("/", 1)[1]], node) if ref else None
        return out

    schema = Verdict.model_json_schema()
    defs = schema["$defs"]
    model = keys(schema, schema)
    model.pop("notes")  # excluded from the JSON (docs/INTERFACES.md says so)
    assert Verdict.model_fields["notes"].exclude

    def doc_keys(value: Any) -> Any:
        if isinstance(value, list):
            return doc_keys(value[0])
        return {k: doc_keys(v) for k, v in value.items()} if isinstance(value, dict) else None

    assert doc_keys(shape) == model, "docs/architecture.md §4.2: the verdict's JSON"


def test_the_metrics_keys_are_what_compute_metrics_returns() -> None:
    import numpy as np
    import pandas as pd

    from oomrl.metrics.performance import compute_metrics

    days = pd.bdate_range("2024-01-01", periods=120)
    noise = np.random.default_rng(7).normal(0.0, 0.01, (2, 120))
    keys = list(compute_metrics(pd.Series(noise[0], days), pd.Series(noise[1], days)))
    said = find("architecture", r"Output keys \(fractions, not percent\): `([^`]+)`").group(1)
    assert [k.strip() for k in said.split(",")] == keys, "docs/architecture.md §4.3 output keys"
    example = json.loads(find("metrics", r"--json\n(\{.*?\})\n```", flat=False).group(1))
    assert list(example) == keys, "docs/metrics.md: the `oomrl metrics --json` example"
    table = re.findall(
        r"^\| ([a-z_]+(?:, [a-z_]+)?) \|",
        find("metrics", r"\| key \| definition \|(.*?)\n\n", flat=False).group(1),
        flags=re.M,
    )
    assert {k for row in table for k in row.split(", ")} <= set(keys), (
        "docs/metrics.md conventions table"
    )


def test_the_newey_west_lags_are_the_regressions() -> None:
    from oomrl.metrics.regression import newey_west_maxlags

    year, low, high = find(
        "metrics", r"\((\d) for a year of 252 sessions, 5 for (\d+)–(\d+) sessions\)"
    ).groups()
    assert newey_west_maxlags(252) == int(year), "docs/metrics.md: HAC lags for a year"
    assert newey_west_maxlags(int(low) - 1) == 4 and newey_west_maxlags(int(low)) == 5, (
        "the first 5-lag length"
    )
    assert newey_west_maxlags(int(high)) == 5 and newey_west_maxlags(int(high) + 1) == 6, (
        "the last 5-lag length"
    )


def test_the_report_rules_are_the_chart_and_window_constants() -> None:
    from oomrl.metrics import charts, friction, short_window

    assert (
        int(find("metrics", r"Under (\d+) sessions \(`oomrl/metrics/short_window.py`").group(1))
        == short_window.MIN_ANNUALIZED_SESSIONS
    ), "docs/metrics.md: too short to annualize"
    assert (
        int(find("metrics", r"a window of up to (\d+) sessions is ticked").group(1))
        == charts.FEW_SESSIONS
    )
    assert (
        int(find("metrics", r"more than (\d+) calendar days without a session").group(1))
        == charts.MAX_JOIN_DAYS
    )
    assert (
        float(find("metrics", r"marks within ([\d.]+) % of the axis").group(1)) / 100
        == charts.MIN_MARK_SPACING
    )
    assert float(find("metrics", r"share above (\d+) %").group(1)) / 100 == friction.ADV_CAP, (
        "friction: ADV share"
    )


def test_the_alert_rules_table_is_the_alert_config() -> None:
    from oomrl.diagnostics.rules import AlertConfig

    c = AlertConfig()
    row = {
        r.split(" | ")[0].strip("| "): r for r in page("metrics").splitlines() if r.startswith("| ")
    }
    pairs = [
        (r"return ≤ −(\d+) %", row["daily_loss"], c.daily_loss_abs * 100),
        (r"previous (\d+) sessions", row["daily_loss"], c.zscore_window),
        (r"≤ −(\d+) \(", row["daily_loss"], c.daily_loss_z),
        (r"≥ (\d+) sessions", row["daily_loss"], c.zscore_min_obs),
        (r"≤ −(\d+) % \(warning\)", row["drawdown"], c.drawdown_warning * 100),
        (r"≤ −(\d+) % \(critical\)", row["drawdown"], c.drawdown_critical * 100),
        (r"≥ ([\d.]+) τ", row["principal_loss_approaching"], c.principal_approach),
        (r"τ = (\d+) %", row["principal_loss_approaching"], c.kill_threshold * 100),
        (r"rolling (\d+)-day IR", row["ir_decay"], c.ir_window),
        (r"≤ −(\d+) \|", row["ir_decay"], -c.ir_threshold),
        (r"over (\d+) sessions", row["execution_decay"], c.leakage_window),
        (r"≥ (\d+) % of NAV", row["execution_decay"], c.leakage_threshold * 100),
        (r"over (\d+) sessions", row["turnover_spike"], c.turnover_window),
        (r"≥ (\d+)× a year, or", row["turnover_spike"], c.turnover_annualized_max),
        (r"≥ (\d+)× the prior", row["turnover_spike"], c.turnover_spike_multiple),
        (r"and ≥ (\d+)× a year", row["turnover_spike"], c.turnover_spike_floor),
    ]
    for pattern, text, value in pairs:
        found = re.search(pattern, text)
        assert found and float(found.group(1)) == pytest.approx(value), (
            f"docs/metrics.md alert rule: {pattern} in {text}"
        )


def test_the_a_share_fees_are_the_rules_defaults() -> None:
    from oomrl.market.rules import AShareRules

    r = AShareRules()
    arch = find(
        "architecture",
        r"Commission ([\d.]+) % with a (\d+) CNY minimum per order; stamp duty on sells "
        r"([\d.]+) % from (\d{4})-(\d\d)-(\d\d)\s+\(([\d.]+) % before\); transfer fee "
        r"([\d.]+) %",
    ).groups()
    assert (
        float(arch[0]) / 100 == pytest.approx(r.commission_rate)
        and float(arch[1]) == r.commission_min
    )
    assert float(arch[2]) / 100 == pytest.approx(r.stamp_duty_rate), "architecture §5 stamp duty"
    assert date(*map(int, arch[3:6])) == r.stamp_duty_change and float(
        arch[6]
    ) / 100 == pytest.approx(r.stamp_duty_rate_before)
    assert float(arch[7]) / 100 == pytest.approx(r.transfer_fee_rate), (
        "architecture §5 transfer fee"
    )
    interfaces = find(
        "INTERFACES",
        r"commission ([\d.]+) min (\d+) CNY, stamp duty on\s+sells ([\d.]+) from "
        r"(\d{4}-\d\d-\d\d) \(([\d.]+) before\), transfer ([\d.]+) both sides.*?"
        r"half-spread ([\d.]+), max ADV participation ([\d.]+)",
    ).groups()
    assert [float(x) for i, x in enumerate(interfaces) if i != 3] == pytest.approx(
        [
            r.commission_rate,
            r.commission_min,
            r.stamp_duty_rate,
            r.stamp_duty_rate_before,
            r.transfer_fee_rate,
            r.half_spread,
            r.max_adv_participation,
        ]
    ), "docs/INTERFACES.md AShareRules defaults"
    assert date.fromisoformat(interfaces[3]) == r.stamp_duty_change
    said = find(
        "portfolio",
        r"default rules \(commission ([\d.]+) % min (\d+) CNY,\s+stamp duty ([\d.]+) % on "
        r"sells, transfer ([\d.]+) %, half-spread (\d+) bp, impact ([\d.]+)·σ·√\(order/ADV\), "
        r"ADV cap\s+(\d+) %",
    ).groups()
    assert [float(x) for x in said] == pytest.approx(
        [
            r.commission_rate * 100,
            r.commission_min,
            r.stamp_duty_rate * 100,
            r.transfer_fee_rate * 100,
            r.half_spread * 1e4,
            r.impact_k,
            r.max_adv_participation * 100,
        ]
    ), "docs/portfolio.md default rules"


def test_the_other_markets_table_is_the_generic_defaults() -> None:
    from oomrl.market.markets import GENERIC_DEFAULTS, MARKETS

    for market in ("us", "hk"):
        (line,) = [
            line for line in page("portfolio").splitlines() if line.startswith(f"| {market} (")
        ]
        _, calendar, benchmark, lot, commission, taxes, other, spread = [
            c.strip() for c in line.strip("|").split("|")
        ]
        rules = {"buy_tax_rate": 0.0, "sell_tax_rate": 0.0, **GENERIC_DEFAULTS[market]}
        assert (calendar, benchmark) == (MARKETS[market].calendar, MARKETS[market].benchmark), (
            market
        )
        assert int(lot.split()[0]) == rules["lot_size"], f"{market} lot"
        rate = re.match(r"([\d.]+) %, min (\d+)|0$", commission)
        assert rate, commission
        assert (float(rate.group(1) or 0) / 100, float(rate.group(2) or 0)) == pytest.approx(
            (rules["commission_rate"], rules["commission_min"])
        ), f"{market} commission"
        tax = float(re.search(r"([\d.]+) %", taxes).group(1)) / 100  # type: ignore[union-attr]
        assert tax == pytest.approx(rules["sell_tax_rate"]), f"{market} sell tax"
        assert ("each side" in taxes) == (rules["buy_tax_rate"] > 0), f"{market} buy tax"
        fee = re.search(r"([\d.]+) %", other)
        assert (float(fee.group(1)) / 100 if fee else 0.0) == pytest.approx(
            rules["transfer_fee_rate"]
        ), market
        assert float(spread.removesuffix(" bp")) / 1e4 == pytest.approx(rules["half_spread"]), (
            f"{market} spread"
        )


def test_the_price_limits_and_lots_are_the_market_rules() -> None:
    import numpy as np

    from oomrl.market import limits, lots

    said = find(
        "data",
        r"±(\d+) % main \(ST ±(\d+) % until (\S+)\), ChiNext ±(\d+) % before (\S+) and ±(\d+) % "
        r"from then, STAR ±(\d+) %, BSE ±(\d+) %",
    ).groups()
    main, main_st, st_change, chinext_old, reform, chinext, star, bse = said

    def fraction(board: int, day: str, st: bool = False) -> float:
        return (
            float(
                limits.limit_fraction(np.array(board), np.array([day], dtype="datetime64[ns]"), st)[
                    0
                ]
            )
            * 100
        )

    before = str(np.datetime64(st_change) - 1)
    assert fraction(limits.MAIN, before) == float(main) and fraction(
        limits.MAIN, before, True
    ) == float(main_st)
    assert fraction(limits.MAIN, st_change, True) == float(main), (
        "ST main board from the 2026 rules"
    )
    assert fraction(limits.CHINEXT, str(np.datetime64(reform) - 1)) == float(chinext_old)
    assert fraction(limits.CHINEXT, reform) == float(chinext), "ChiNext after the reform"
    assert fraction(limits.STAR, reform) == float(star) and fraction(limits.BSE, reform) == float(
        bse
    )
    assert date.fromisoformat(st_change) == limits.MAIN_ST_TEN_PERCENT
    assert date.fromisoformat(reform) == limits.CHINEXT_REFORM
    free = find(
        "portfolio",
        r"No limit on the first (\d+) sessions of STAR listings, ChiNext listings from (\S+) "
        r"and main-board\s+listings from (\S+);",
    ).groups()
    assert int(free[0]) == limits.FREE_SESSIONS_REGISTRATION
    assert (date.fromisoformat(free[1]), date.fromisoformat(free[2])) == (
        limits.CHINEXT_REFORM,
        limits.MAIN_REGISTRATION,
    )
    lot_text = find(
        "portfolio",
        r"main board and ChiNext (\d+)-share\s+lots; STAR at least (\d+) shares, then "
        r"(\d+)-share steps; BSE at least (\d+), then (\d+)-share steps",
    ).groups()
    assert [int(x) for x in lot_text] == [
        lots.ROUND_LOT.minimum,
        lots.STAR_LOT.minimum,
        lots.STAR_LOT.step,
        lots.BSE_LOT.minimum,
        lots.BSE_LOT.step,
    ], "docs/portfolio.md lots"
    assert lots.ROUND_LOT.step == lots.ROUND_LOT.minimum


def test_the_validation_and_store_constants_are_the_data_code() -> None:
    from oomrl.data import catalog, lock, parts, validation
    from oomrl.data.sources import synthetic

    assert (
        float(find("data", r"plus ([\d.]+) % and two ticks of slack").group(1)) / 100
        == validation.LIMIT_TOLERANCE
    )
    assert (
        float(find("data", r"or (\d+)× above the qfq high").group(1)) == validation.MAX_QFQ_FACTOR
    )
    assert (
        float(find("data", r"a daily move\s*> (\d+) %").group(1)) / 100 == validation.INDEX_MAX_MOVE
    )
    assert int(find("data", r"for the last (\d+) ingests").group(1)) == catalog.MAX_INGEST_RECORDS
    assert int(find("data", r"a year with more than (\d+) parts").group(1)) == parts.MAX_PARTS
    assert find("data", r"part-\*\.parquet \((\w+)\)").group(1) == parts.COMPRESSION
    assert (
        float(find("data", r"up to `--wait` seconds \(default (\d+)\)").group(1))
        == lock.DEFAULT_WAIT_S
    )
    assert (
        figure(find("data", r"`synthetic:N` takes 1 to ([\d,]+) symbols").group(1))
        == synthetic.MAX_SYMBOLS
    )
    fetch = module_constants("tasks.market_data")
    retries, first, second, third, jitter, hours = find(
        "data",
        r"\((\d+) retries, exponential backoff (\d+)/(\d+)/(\d+) s with (\d+) % jitter\) "
        r"and caches results "
        r"by source \+ symbol \+\s+range for (\d+) h",
    ).groups()
    assert int(retries) == fetch["FETCH_RETRIES"] and float(jitter) / 100 == fetch["JITTER_FACTOR"]
    assert [float(first), float(second), float(third)] == [
        fetch["BACKOFF_SECONDS"] * 2**i for i in range(3)
    ]
    cache_for = re.search(
        r"CACHE_FOR = timedelta\(hours=(\d+)\)", (REPO / "tasks" / "market_data.py").read_text()
    )
    assert cache_for and cache_for.group(1) == hours, "docs/data.md: the fetch cache"


def test_the_bundled_sample_is_what_the_docs_say() -> None:
    import pandas as pd

    sample = REPO / "data" / "sample"
    row = find(
        "data",
        r"\| `sample` \| `data/sample/bars.parquet` \((\w+), (\d+) members, (\d+)\.\.(\S+)\) \| "
        r"price (\d+)\.\., total return \| PIT (\S+)\.\.(\S+) \|",
    ).groups()
    bars = pd.read_parquet(sample / "bars.parquet", columns=["date", "symbol", "adjustment"])
    assert set(bars["adjustment"]) == {row[0]} and bars["symbol"].nunique() == int(row[1]), (
        "sample bars"
    )
    assert bars["date"].min().year == int(row[2]) and bars["date"].max() == pd.Timestamp(row[3])
    index = pd.read_parquet(sample / "index.parquet")
    assert set(index["kind"]) == {"price", "total_return"} and index["date"].min().year == int(
        row[4]
    )
    membership = pd.read_csv(sample / "membership.csv")
    assert (membership["effective_date"].min(), membership["effective_date"].max()) == (
        row[5],
        row[6],
    )
    start, end, rise = find(
        "portfolio", r"rose ([\d.]+) % over the\s+period \(([\d.]+) → ([\d.]+)\)"
    ).groups()
    close = index[index["kind"] == "price"].set_index("date")["close"]
    first, last = close.loc["2024-07-01"], close.loc["2026-02-27"]
    assert (round(first, 2), round(last, 2)) == (float(end), float(rise)), (
        "docs/portfolio.md: CSI 300 levels"
    )
    assert round((last / first - 1) * 100, 1) == float(start), (
        "docs/portfolio.md: the CSI 300's rise"
    )


def test_the_reward_and_kill_switch_defaults_are_the_code() -> None:
    from oomrl.diagnostics.rules import AlertConfig
    from oomrl.portfolio import killswitch, reward
    from oomrl.settings import LedgerSettings, MarketSettings

    lam = float(find("portfolio", r"`reward_lambda` \(λ = ([\d.]+)").group(1))
    penalty = float(find("portfolio", r"\(P_terminal = ([\d.]+)").group(1))
    sigma, adv, capital, names = find(
        "portfolio",
        r"σ = ([\d.]+) % and ADV =\s+([\d.]+) × 10⁸ CNY.*?W = 10⁷ CNY.*?"
        r"n = (\d+)\s+names",
    ).groups()[:3] + (None,)
    sigma_f, adv_f = float(sigma) / 100, float(adv) * 1e8
    n = int(find("portfolio", r"n = (\d+)\s+names").group(1))
    gamma = find(
        "portfolio", r"= ([\d.]+) × 10⁻⁴\s+\(`calibrated_gamma\(\)`; `DEFAULT_GAMMA`\)"
    ).group(1)
    assert lam == reward.DEFAULT_LAMBDA == MarketSettings.model_fields["reward_lambda"].default, "λ"
    assert (
        penalty
        == reward.DEFAULT_TERMINAL_PENALTY
        == MarketSettings.model_fields["reward_terminal_penalty"].default
    )
    assert (sigma_f, adv_f, 1e7, n) == (
        reward.REFERENCE_SIGMA,
        reward.REFERENCE_ADV,
        reward.REFERENCE_NAV,
        reward.REFERENCE_NAMES,
    ), "the calibration's reference values"
    assert (
        float(gamma) * 1e-4
        == reward.DEFAULT_GAMMA
        == MarketSettings.model_fields["reward_gamma"].default
    ), "γ"
    assert round(
        reward.calibrated_gamma(sigma=sigma_f, adv=adv_f, nav=1e7, names=n) * 1e4, 1
    ) == float(gamma)
    tau = float(find("architecture", r"τ \(default ([\d.]+)\)").group(1))
    assert (
        tau
        == killswitch.DEFAULT_THRESHOLD
        == LedgerSettings.model_fields["kill_threshold"].default
        == AlertConfig().kill_threshold
    ), "τ"
    assert float(find("portfolio", r"kill switch τ = ([\d.]+)").group(1)) == tau


def test_the_cross_validation_figures_are_the_code() -> None:
    from oomrl.portfolio.recompute import recompute_fresh
    from oomrl.repair import crossval
    from oomrl.settings import AgentSettings

    assert int(find("portfolio", r"`LONG_SESSIONS` = (\d+)").group(1)) == crossval.LONG_SESSIONS
    assert (
        int(find("portfolio", r"`cross_validation_days` = (\d+)").group(1))
        == AgentSettings.model_fields["cross_validation_days"].default
    )
    test, margin, z = find(
        "portfolio", r"The default is (\S+) with margin ([\d.]+) and z = ([\d.]+)"
    ).groups()
    assert (test, float(margin), float(z)) == (
        crossval.DEFAULT_RULE.test,
        crossval.DEFAULT_RULE.margin,
        crossval.DEFAULT_RULE.z,
    ), "the default promotion rule"
    assert all(
        AgentSettings.model_fields[f"promotion_{key}"].default
        == getattr(crossval.DEFAULT_RULE, key)
        for key in ("test", "margin", "z")
    ), "the settings' default is the rule's"
    assert (
        int(find("portfolio", r"(\d+) of them, evenly\s+spread").group(1))
        == inspect.signature(recompute_fresh).parameters["count"].default
    ), "decisions recomputed"
    assert (
        int(find("agent", r"long window \((\d+)\s+sessions up to the autopsy date\)").group(1))
        == crossval.LONG_SESSIONS
    )
    participation, turnover = find("agent", r"IR floor; (\d+) % / (\d+) % relative slack").groups()
    assert (float(participation) / 100, float(turnover) / 100) == (
        crossval.PARTICIPATION_SLACK,
        crossval.TURNOVER_SLACK,
    ), "the constraint slack"


def test_the_agent_settings_defaults_are_the_code() -> None:
    from oomrl.settings import AgentSettings

    scale = {"k": 1e3, "M": 1e6, "": 1.0}
    said = re.findall(
        r"`OOMRL_AGENT_(\w+)`[,\s]*\(?(?:default\s+)?\$?(\d[\d,.]*)\s*(k|M)?\b", page("agent")
    )
    assert len(said) >= 10, "the agent settings of docs/agent.md moved: keep this test with them"
    for name, value, unit in said:
        field = AgentSettings.model_fields[name.lower()]
        assert figure(value) * scale[unit] == field.default, (
            f"docs/agent.md: OOMRL_AGENT_{name} = {value}{unit}"
        )
    listed = find(
        "INTERFACES", r"`settings.AgentSettings` \(env prefix `OOMRL_AGENT_`: (.*?)\),"
    ).group(1)
    for name in re.findall(r"\b([a-z]+_[a-z_]+)\b", listed):
        assert name in AgentSettings.model_fields, f"docs/INTERFACES.md: AgentSettings.{name}"


def test_the_webhook_settings_and_tolerance_are_the_code() -> None:
    from oomrl.settings import WebhookSettings
    from oomrl.webhook import signing

    listed = find("INTERFACES", r"settings env prefix `OOMRL_WEBHOOK_` \((.*?); and").group(1)
    names = {word.lower() for word in re.findall(r"\b([A-Z][A-Z_]+)\b", listed)}
    assert names == set(WebhookSettings.model_fields), "docs/INTERFACES.md: the webhook settings"
    stale = int(find("architecture", r"stale \(> (\d+) s\)").group(1))
    assert (
        stale
        == WebhookSettings.model_fields["tolerance_s"].default
        == inspect.signature(signing.verify).parameters["tolerance_s"].default
    ), "the signature's tolerance"


def test_the_ledger_tables_the_docs_list_are_the_ledgers() -> None:
    import sqlalchemy as sa

    from oomrl.portfolio.ledger_tables import ledger_tables

    tables = set(ledger_tables(sa.MetaData()))
    portfolio = find("portfolio", r"Tables: (.*?)\. A rebalance").group(1)
    while "(" in portfolio:
        portfolio = re.sub(r" ?\([^()]*\)", "", portfolio)
    assert {t.strip() for t in portfolio.split(",")} == tables, (
        "docs/portfolio.md: the ledger's tables"
    )
    interfaces = find("INTERFACES", r"use too\); (accounts,.*?) tables\.").group(1)
    assert {t.strip() for t in interfaces.split(",")} == tables, (
        "docs/INTERFACES.md: the ledger's tables"
    )
    listed = find("architecture", r"ledger.db SQLite \(default\): (.*?) workspace/").group(1)
    named = {t.strip() for t in listed.split(",")}
    extra = {"repair_claims", "llm_budgets", "llm_calls", "webhook_deliveries"}
    assert named <= tables | extra and extra <= string_literals(), (
        "docs/architecture.md §3: the ledger's tables"
    )


def test_the_autopsy_example_is_a_subset_of_the_model() -> None:
    from pydantic import BaseModel

    from oomrl.diagnostics.autopsy import Autopsy

    example = json.loads(find("architecture", r"### 4.4.*?```json\n(.*?)```", flat=False).group(1))

    def outside(model: type[BaseModel], data: dict[str, Any], where: str) -> list[str]:
        out = []
        for key, value in data.items():
            if key not in model.model_fields:
                out.append(f"{where}{key}")
                continue
            sub = model.model_fields[key].annotation
            if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
                out += outside(sub, value, f"{where}{key}.")
        return out

    assert outside(Autopsy, example, "") == [], (
        "docs/architecture.md §4.4: the model is a superset of the example"
    )
    listed = find("INTERFACES", r"`autopsy.Constraints` \((.*?)\) is what").group(1)
    from oomrl.diagnostics.autopsy import Constraints

    assert set(re.findall(r"[a-z_]+", listed.replace("optional", ""))) == set(
        Constraints.model_fields
    )


def test_the_name_limits_are_the_code() -> None:
    from oomrl import names

    for constant in ("ACCOUNT_MAX", "ALERT_ID_MAX", "STRATEGY_MAX"):
        value = int(find("INTERFACES", rf"`{constant}=(\d+)`").group(1))
        assert value == getattr(names, constant), f"docs/INTERFACES.md: {constant}"


def test_the_weekly_strategy_constraints_are_its_params() -> None:
    # Read from S's source: the project's tests reach S only through a strategy host.
    tree = code_tree()["strategies.weekly_liquidity"]
    params = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Params"))
    defaults = {
        n.target.id: ast.literal_eval(n.value.args[0])
        for n in params.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and isinstance(n.value, ast.Call)
    }
    adv, participation, turnover, slack = find(
        "portfolio",
        r"ADV ≥ (\d)·10⁸ CNY, trades ≤ (\d+) % of ADV, weekly turnover ≤ ([\d.]+) .*?with "
        r"(\d+) % slack",
    ).groups()
    assert (float(adv) * 1e8, float(participation) / 100, float(turnover)) == (
        defaults["min_adv"],
        defaults["max_adv_participation"],
        defaults["max_weekly_turnover"],
    ), "docs/portfolio.md: weekly_liquidity's limits"
    assert 1 - float(slack) / 100 == pytest.approx(
        module_constants("strategies.weekly_liquidity")["FILL_SLACK"]
    )
