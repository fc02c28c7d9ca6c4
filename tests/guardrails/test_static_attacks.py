"""The static half of the gate blocks every extra attack patch by its named rule and accepts the
benign ones."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from guardrails.patch.diffs import apply_patch, check_patch, parse_patch
from guardrails.static.capabilities import Policy
from guardrails.static.sanitizer import scan_source
from guardrails.static.testquality import scan_tests

STATIC = Path(__file__).resolve().parent.parent / "fixtures" / "guardrails_static"
SCOPES = {"code-patch": (["strategies"], ["tests"]), "test-gen": (["tests"], ["strategies"])}


def cases(folder: str) -> list[dict[str, str]]:
    with (STATIC / folder / "cases.csv").open() as handle:
        return list(csv.DictReader(handle))


def static_rules(case: dict[str, str], tmp_path: Path) -> set[str]:
    """Every rule the static checks raise for one case, as the gate runs them: diff, apply, scan."""
    phase = case["phase"]
    writable, locked = SCOPES[phase]
    changes = parse_patch((STATIC / case["patch"]).read_text())
    found = {v.rule for v in check_patch(changes, writable, locked, phase)}
    if found:
        return found
    original = STATIC / "workspaces" / case["workspace"]
    root = tmp_path / "w"
    shutil.copytree(original, root)
    result = apply_patch(changes, root)
    found |= {v.rule for v in result.violations}
    scan = scan_source if phase == "code-patch" else scan_tests
    policy = Policy.of("source" if phase == "code-patch" else "tests")
    for path in result.written:
        old = original / path
        if path.endswith(".py"):
            found |= {
                v.rule
                for v in scan(
                    path,
                    (root / path).read_bytes(),
                    old.read_bytes() if old.exists() else None,
                    policy,
                )
            }
    return found


def test_the_extra_corpus_is_large_and_covers_both_phases() -> None:
    attacks = cases("attacks")
    assert len(attacks) >= 20 and len(cases("benign")) >= 6
    assert {c["phase"] for c in attacks} == {"code-patch", "test-gen"}
    assert all((STATIC / "attacks" / f"{c['id']}.txt").read_text().strip() for c in attacks)


@pytest.mark.parametrize("case", cases("attacks"), ids=lambda c: c["id"])
def test_attack_is_blocked_by_its_rule(case: dict[str, str], tmp_path: Path) -> None:
    if case["rule"].startswith("runtime:"):  # harmless to the static checks, caught when run
        assert static_rules(case, tmp_path) == set()
    else:
        assert case["rule"] in static_rules(case, tmp_path)


@pytest.mark.parametrize("case", cases("benign"), ids=lambda c: c["id"])
def test_benign_patch_passes_the_static_checks(case: dict[str, str], tmp_path: Path) -> None:
    assert static_rules(case, tmp_path) == set()
