"""W2: gate wall time / plain `pytest --cov --cov-branch` on the same workspace, and sanitizer
lines/s.

Workspaces: this repo's strategies/ + tests/strategies (skipped when absent) and a generated
workspace of about 8,000 source lines with tests at full branch coverage. Tests reach S only through
its strategy host (`strategy_host.call`), as in every workspace, so the plain run loads
`guardrails.sandbox.hostplugin` (one jailed host, S's coverage measured there and joined to
pytest-cov's) and the gate runs S in a host of its own for each test run. The gate judges a small
benign code-patch (one added comment line) so it runs the whole pipeline: scope check, apply,
capability sanitizer, two sandboxed test runs side by side (forward with coverage, reversed),
coverage checks. The sanitizer is timed over the generated package (scanned as new files), in CPU
seconds of this process and in wall seconds. Each figure is taken `--runs` times (default 3) and the
load average is printed with it. Prints figures; asserts nothing. Usage: .venv/bin/python
bench/bench_gate.py [--lock bwrap|hash-only] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guardrails.gate import run_gate
from guardrails.static import Policy, scan_source

REPO = Path(__file__).resolve().parent.parent

GUARD = "[tool.oomrl.guard]\nsource = [\"{source}\"]\ntests = [\"{tests}\"]\ncoverage_min = 95\n"
MODULE_FUNCTIONS = 12  # each generated function is 8 lines with two branches


def repo_workspace(root: Path) -> Path | None:
    """A copy of this repo's S and T with its own contract, or None when they do not exist yet."""
    if not (REPO / "strategies").is_dir() or not (REPO / "tests" / "strategies").is_dir():
        return None
    ws = root / "repo_ws"
    shutil.copytree(
        REPO / "strategies", ws / "strategies", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        REPO / "tests" / "strategies",
        ws / "tests" / "strategies",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (ws / "pyproject.toml").write_text(GUARD.format(source="strategies", tests="tests/strategies"))
    return ws


def _function(index: int) -> str:
    return (
        f"def f{index}(x: int, y: int) -> int:\n"
        f"    \"\"\"Generated function {index}.\"\"\"\n"
        f"    if x > y:\n"
        f"        z = x - y + {index}\n"
        f"    else:\n"
        f"        z = y - x * {index % 7 + 1}\n"
        f"    return z % {index + 3}\n\n\n"
    )


def _test(module: int, index: int) -> str:
    target = f"genpkg.m{module}:f{index}"
    return (
        f"def test_m{module}_f{index}():\n"
        f"    assert call({target!r}, 5, 2) == (5 - 2 + {index}) % {index + 3}\n"
        f"    assert call({target!r}, 2, 5) == (5 - 2 * {index % 7 + 1}) % {index + 3}\n\n\n"
    )


def generated_workspace(root: Path, lines: int = 8000) -> Path:
    """A package of about `lines` source lines and one test module per source module."""
    ws = root / "gen_ws"
    (ws / "genpkg").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "genpkg" / "__init__.py").write_text('"""Generated package."""\n')
    per_module = MODULE_FUNCTIONS * 9 + 3  # lines of one generated module
    for module in range(max(1, round(lines / per_module))):
        body = '"""Generated module."""\n\n\n' + "".join(
            _function(i) for i in range(MODULE_FUNCTIONS)
        )
        (ws / "genpkg" / f"m{module}.py").write_text(body)
        tests = "from strategy_host import call\n\n\n" + "".join(
            _test(module, i) for i in range(MODULE_FUNCTIONS)
        )
        (ws / "tests" / f"test_m{module}.py").write_text(tests)
    (ws / "pyproject.toml").write_text(GUARD.format(source="genpkg", tests="tests"))
    return ws


def comment_patch(ws: Path, source: str) -> str:
    """A benign patch: one comment line appended to the first source module."""
    target = max((ws / source).glob("*.py"))
    rel = target.relative_to(ws).as_posix()
    lines = target.read_text().splitlines()
    start = max(1, len(lines) - 2)
    context = lines[start - 1 :]
    body = "".join(f" {line}\n" for line in context)
    return (
        f"--- a/{rel}\n+++ b/{rel}\n@@ -{start},{len(context)} +{start},{len(context) + 1} @@\n"
        f"{body}+# benchmark: a benign added comment\n"
    )


def plain_pytest_seconds(ws: Path, source: str, tests: str, lock: str) -> tuple[float, bool]:
    """Wall time of `pytest --cov --cov-branch` run directly on the workspace (its tests calling S
    in one host of `guardrails.sandbox.hostplugin`), and whether it passed."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "guardrails.sandbox.hostplugin",
            "--strategy-lock",
            lock,
            f"--cov={source}",
            "--cov-branch",
            "--cov-report=",
            tests,
        ],
        cwd=ws,
        check=False,
        capture_output=True,
    )
    return time.perf_counter() - started, done.returncode == 0


def gate_seconds(ws: Path, source: str, lock: str) -> tuple[float, bool, list[str]]:
    """Wall time of the gate judging the benign comment patch."""
    started = time.perf_counter()
    verdict = run_gate(ws, "code-patch", comment_patch(ws, source), lock=lock)
    return time.perf_counter() - started, verdict.accepted, [v.rule for v in verdict.violations]


def sanitizer_lines_per_second(ws: Path, source: str) -> tuple[int, float, float]:
    """(lines, lines per CPU second, lines per wall second) of the sanitizer over every source
    file of the package, scanned as new files."""
    files = sorted((ws / source).rglob("*.py"))
    texts = [(f.relative_to(ws).as_posix(), f.read_bytes()) for f in files]
    total = sum(text.count(b"\n") for _, text in texts)
    policy = Policy.of("source", frozenset({source}))
    cpu, wall = time.process_time(), time.perf_counter()
    for rel, text in texts:
        scan_source(rel, text, None, policy)
    return total, total / (time.process_time() - cpu), total / (time.perf_counter() - wall)


def load() -> str:
    """The 1-minute load average, printed next to each figure."""
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> None:
    """Print W2 figures for both workspaces, `--runs` times each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", default="bwrap", choices=["bwrap", "hash-only"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-gate-"))
    try:
        cases = [
            ("repo strategies", repo_workspace(root), "strategies", "tests/strategies"),
            ("generated ~8k lines", generated_workspace(root), "genpkg", "tests"),
        ]
        print(f"W2 gate overhead (lock {args.lock}, {os.cpu_count()} cores)")
        for name, ws, source, tests in cases:
            if ws is None:
                print(f"  {name}: skipped (strategies/ or tests/strategies missing)")
                continue
            src_lines = sum(f.read_text().count("\n") for f in (ws / source).rglob("*.py"))
            for run in range(1, args.runs + 1):
                plain, passed = plain_pytest_seconds(ws, source, tests, args.lock)
                gate, accepted, rules = gate_seconds(ws, source, args.lock)
                print(
                    f"  {name} run {run}: {src_lines} source lines; plain pytest --cov "
                    f"{plain:.2f} s{'' if passed else ' (FAILED)'}; gate {gate:.2f} s "
                    f"({'accepted' if accepted else 'REJECTED ' + ','.join(rules)}); "
                    f"ratio {gate / plain:.2f}x (target <= 2.5x); {load()}"
                )
        for run in range(1, args.runs + 1):
            total, cpu, wall = sanitizer_lines_per_second(cases[1][1], "genpkg")  # type: ignore[arg-type]
            print(
                f"  sanitizer run {run}: {total} lines at {cpu:,.0f} lines/s (CPU time), "
                f"{wall:,.0f} lines/s (wall; target >= 100,000); {load()}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
