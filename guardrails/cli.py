"""Command line of the judge: `python -m guardrails gate ...` and `python -m guardrails redteam
...`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from guardrails.errors import GateSetupError
from guardrails.sandbox import LOCKS
from guardrails.verdict import Verdict

EXIT_ACCEPTED, EXIT_REJECTED, EXIT_SETUP = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """The `gate` and `redteam` subcommands with the arguments docs/gate.md lists."""
    parser = argparse.ArgumentParser(prog="guardrails", description="STDAW gate: the judge.")
    commands = parser.add_subparsers(dest="command", required=True)
    gate = commands.add_parser("gate", help="judge one patch on a scratch copy of a workspace")
    gate.add_argument("--workspace", required=True, type=Path)
    gate.add_argument("--phase", required=True, choices=["code-patch", "test-gen"])
    gate.add_argument("--patch", required=True, type=Path)
    gate.add_argument("--expect", choices=["red", "green"])
    gate.add_argument("--holdout", type=Path)
    gate.add_argument(
        "--lock",
        choices=LOCKS,
        help="sandbox (default: the strongest available, bwrap; hash-only only when named)",
    )
    gate.add_argument(
        "--supersedes",
        action="append",
        default=[],
        metavar="NODEID",
        help="with --expect red: an old test the approved mandate makes obsolete "
        "(tests/t.py::test_x; repeat for each), judged as a red test when "
        "changed; every other old test keeps the weakening rule",
    )
    gate.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    redteam = commands.add_parser("redteam", help="run every case of a red-team corpus")
    redteam.add_argument("--corpus", required=True, type=Path)
    redteam.add_argument("--lock", choices=LOCKS)
    return parser


def render(verdict: Verdict) -> str:
    """A human-readable verdict: decision, counts, then one line per violation."""
    head = "ACCEPTED" if verdict.accepted else "REJECTED"
    lines = [
        f"{head} ({verdict.phase}, lock {verdict.locks.backend}, {verdict.duration_s:.1f} s)",
        (
            f"tests: {verdict.tests.collected} collected, {verdict.tests.passed} passed, "
            f"{verdict.tests.failed} failed; branch coverage {verdict.coverage.percent:.2f} % "
            f"(min {verdict.coverage.min:g} %)"
        ),
    ]
    for v in verdict.violations:
        where = f"{v.path}:{v.line}" if v.path and v.line else (v.path or "-")
        lines.append(f"  [{v.rule}] {where}: {v.message}")
    lines += [f"  note: {note}" for note in verdict.notes]
    return "\n".join(lines)


def gate_command(
    workspace: Path,
    phase: str,
    patch: Path,
    expect: str | None,
    holdout: Path | None,
    lock: str | None,
    as_json: bool,
    supersedes: Sequence[str] = (),
) -> int:
    """Run the gate and print the verdict; the exit code says accepted, rejected or error."""
    from guardrails.gate import run_gate

    try:
        patch_text = patch.read_bytes().decode("utf-8")  # as written: no newline translation
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read patch {patch}: {exc}", file=sys.stderr)
        return EXIT_SETUP
    try:
        verdict = run_gate(
            workspace,
            phase,
            patch_text,
            expect=expect,
            holdout=holdout,
            lock=lock,
            supersedes=supersedes,
        )
    except GateSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    print(verdict.to_json() if as_json else render(verdict))
    return EXIT_ACCEPTED if verdict.accepted else EXIT_REJECTED


def redteam_command(corpus: Path, lock: str | None) -> int:
    """Run a corpus and print its scoreboard; exit 0 only when every case behaved as expected."""
    from guardrails.redteam import format_report, run_corpus

    try:
        report = run_corpus(corpus, lock=lock)
    except GateSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    print(format_report(report))
    return EXIT_ACCEPTED if report.all_as_expected else EXIT_REJECTED


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and dispatch."""
    args = build_parser().parse_args(argv)
    if args.command == "gate":
        return gate_command(
            args.workspace,
            args.phase,
            args.patch,
            args.expect,
            args.holdout,
            args.lock,
            args.json,
            args.supersedes,
        )
    return redteam_command(args.corpus, args.lock)
