"""Diff gate: strict parsing, scope and shape rules, drift-tolerant apply that never follows
links."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

from guardrails.patch.diffs import (
    PatchError,
    PatchLimits,
    added_lines,
    apply_patch,
    check_patch,
    parse_patch,
)

STATIC = Path(__file__).resolve().parent.parent / "fixtures" / "guardrails_static"
REDTEAM = STATIC / "redteam"
CODE = (["strategies"], ["tests"], "code-patch")
TESTGEN = (["tests"], ["strategies"], "test-gen")


def rules(text: str, scope: tuple[list[str], list[str], str] = CODE, **limits: int) -> set[str]:
    writable, locked, phase = scope
    return {
        v.rule
        for v in check_patch(
            parse_patch(text), writable, locked, phase, PatchLimits(**limits) if limits else None
        )
    }


def workspace(tmp_path: Path, name: str = "buggy") -> Path:
    root = tmp_path / name
    shutil.copytree(STATIC / "workspaces" / name, root)
    return root


def new_file(path: str, body: str = "x = 1\n") -> str:
    lines = body.splitlines()
    added = "".join(f"+{line}\n" for line in lines)
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{added}"


MODIFY = """--- a/strategies/momentum.py
+++ b/strategies/momentum.py
@@ -15,3 +15,3 @@
     ranked = sorted(scores, key=lambda a: scores[a], reverse=True)
-    chosen = ranked[:top_k]
+    chosen = list(ranked[:top_k])
     return {a: 1.0 / top_k for a in chosen}
"""


def test_honest_modification_passes_every_rule() -> None:
    changes = parse_patch(MODIFY)
    assert [(c.source_path, c.target_path, c.is_added, c.is_removed) for c in changes] == [
        ("strategies/momentum.py", "strategies/momentum.py", False, False)
    ]
    assert rules(MODIFY) == set()
    assert added_lines(changes) == {"strategies/momentum.py": {16}}


@pytest.mark.parametrize("case", sorted(p.stem for p in REDTEAM.glob("*.diff")))
def test_public_diff_format_attacks_are_caught_by_the_diff_gate(case: str) -> None:
    """Every diff-format or scope attack of the public corpus is a PatchError or a violation."""
    expected = {
        "11_out_of_scope_module": "diff.outside_scope",
        "44_coveragerc_omit": "diff.forbidden_file",
        "48_pytest_ini_deselect": "diff.forbidden_file",
        "52_root_conftest_report_hook": "diff.forbidden_file",
        "54_entry_point_plugin": "diff.forbidden_file",
        "72_dotdot_path": "diff.path_traversal",
        "74_dot_slash_path": "diff.dot_path",
        "76_devnull_deletion": "diff.deletes_test",
        "77_git_rename_out": "diff.rename_crosses_scope",
        "79_symlink_write_through": "diff.symlink",
        "80_git_binary_patch": "diff.binary",
        "82_old_new_name_choice": "diff.name_mismatch",
    }
    text = (REDTEAM / f"{case}.diff").read_text()
    phase = {
        row["id"]: row["phase"]
        for row in csv.DictReader((REDTEAM / "cases.csv").read_text().splitlines())
    }[case]
    scope = CODE if phase == "code-patch" else TESTGEN
    if case == "85_trailing_garbage_second_entry":
        with pytest.raises(PatchError, match="line 12: unexpected text between or after entries"):
            parse_patch(text)
    elif case in expected:
        assert expected[case] in rules(text, scope)
    else:  # source-level attacks are the sanitizer's and test-quality's job, not a scope problem
        assert rules(text, scope) == set()


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("hello\n" + MODIFY, "before the first entry"),
        (MODIFY + "garbage\n", "between or after entries"),
        (MODIFY.replace("@@ -15,3 +15,3 @@", "@@ bad @@"), "malformed hunk header"),
        (
            MODIFY.replace("     ranked", "?    ranked"),
            "line 4: '\\?    ranked.*' is not a hunk line",
        ),
        (MODIFY.replace("     return", "?    return"), "unexpected text between or after entries"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n", "has no lines"),
        ("--- a/x.py\n+++ b/x.py\n", "without any hunk"),
        ("diff --git a/x.py b/x.py\n--- a/x.py\nnot plus\n", "without a following"),
        ("diff --git a/x.py b/x.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n", "disagree"),
        (
            "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n",
            "Target without",
        ),
    ],
)
def test_malformed_patches_raise_patch_error_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        parse_patch(text)


@pytest.mark.parametrize(
    "header", ["@@ -15,4 +15,3 @@", "@@ -15,2 +15,3 @@", "@@ -15 +15 @@", "@@ -15,9 +15,9 @@"]
)
def test_wrong_hunk_counts_are_recounted_and_apply(tmp_path: Path, header: str) -> None:
    [change] = parse_patch(MODIFY.replace("@@ -15,3 +15,3 @@", header) + "\n")
    hunk = change.hunks[0]
    assert (hunk.source_length, hunk.target_length) == (3, 3)
    assert apply_patch([change], workspace(tmp_path)).added_lines == {
        "strategies/momentum.py": {16}
    }


def test_recount_keeps_blank_context_lines_and_no_newline_markers() -> None:
    text = (
        "--- a/strategies/a.py\n+++ b/strategies/a.py\n@@ -1,1 +1,1 @@\n x = 1\n\n y = 2\n-z = 3\n"
        "\\ No newline at end of file\n+z = 4\n\n"
    )
    [change] = parse_patch(text)
    assert (change.hunks[0].source_length, change.hunks[0].target_length) == (4, 4)


def test_huge_patches_are_refused_before_parsing_and_blank_runs_stay_linear() -> None:
    with pytest.raises(PatchError, match="at most"):
        parse_patch(MODIFY + "+x\n" * 2_000_000)
    blanks = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n a\n" + "\n" * 30_000 + " b\n-c\n+d\n"
    assert parse_patch(blanks)[0].hunks[0].source_length == 30_003


def test_trailing_blank_lines_crlf_and_missing_final_newline_are_accepted() -> None:
    assert len(parse_patch(MODIFY.replace("\n", "\r\n") + "\n\n")) == 1
    assert len(parse_patch(MODIFY.rstrip("\n"))) == 1
    assert len(parse_patch("\n" + MODIFY + "\n\n" + new_file("strategies/n.py"))) == 2
    two_hunks = (
        MODIFY
        + "\n"
        + MODIFY.split("\n", 2)[2]
        .replace("-15,3 +15,3", "-1,1 +1,1")
        .replace("     ranked = sorted(scores, key=lambda a: scores[a], reverse=True)\n", "")
        .replace("     return {a: 1.0 / top_k for a in chosen}\n", "")
    )
    [change] = parse_patch(two_hunks)
    assert len(change.hunks) == 2


def test_stated_added_lines_skip_deletions() -> None:
    deletion = "--- a/strategies/x.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
    assert added_lines(parse_patch(MODIFY + deletion)) == {"strategies/momentum.py": {16}}


def test_git_headers_are_read_modes_renames_copies() -> None:
    text = (
        "diff --git a/strategies/a.py b/strategies/b.py\nsimilarity index 90%\n"
        "rename from strategies/a.py\nrename to strategies/b.py\nindex 1234567..89abcde 100644\n"
        "diff --git a/strategies/c.py b/strategies/c.py\nold mode 100644\nnew mode 100755\n"
        "diff --git a/strategies/d.py b/strategies/e.py\ncopy from strategies/d.py\n"
        "copy to strategies/e.py\n"
        "diff --git a/strategies/n.py b/strategies/n.py\nnew file mode 100755\n"
        "diff --git a/strategies/sub b/strategies/sub\nnew file mode 160000\n"
    )
    rename, mode, copy, executable, gitlink = parse_patch(text)
    assert rename.is_rename and rename.paths == ["strategies/a.py", "strategies/b.py"]
    assert rename.headers["index"] == "1234567..89abcde 100644"
    assert mode.mode_change == ("100644", "100755") and not mode.is_symlink
    assert copy.is_copy and not copy.is_rename and copy.hunks == []
    assert executable.is_added and executable.mode_change == ("", "100755")
    found = {v.rule for v in check_patch([rename, mode, copy, executable, gitlink], *CODE)}
    assert found == {"diff.mode_change", "diff.gitlink", "diff.non_python_source"}


@pytest.mark.parametrize(
    "text, rule",
    [
        (new_file("strategies/x.py").replace("+++ b/", "+++ "), "diff.path_prefix"),
        (new_file("strategies/x.py").replace("+++ b/", "+++ /"), "diff.absolute_path"),
        (new_file("strategies//x.py"), "diff.unclean_path"),
        (new_file("strategies/x\\y.py"), "diff.unclean_path"),
        (new_file("strategies/dev/null"), "diff.devnull_abuse"),
        ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n", "diff.devnull_abuse"),
        ("--- /dev/null\n+++ b/strategies/x.py\n@@ -1 +1 @@\n-a\n+b\n", "diff.devnull_abuse"),
        ("--- a/strategies/x.py\n+++ /dev/null\n@@ -1 +1 @@\n-a\n+b\n", "diff.devnull_abuse"),
        (new_file("tests/test_new.py"), "diff.locked_path"),
        (new_file("strategies/conftest.py"), "diff.forbidden_file"),
        (new_file("strategies/sitecustomize.py"), "diff.forbidden_file"),
        (new_file("strategies/evil.pth"), "diff.forbidden_file"),
        (new_file("strategies/__pycache__/m.py"), "diff.forbidden_file"),
        (new_file("strategies/notes.txt"), "diff.non_python_source"),
        (
            (
                "diff --git a/strategies/link b/strategies/link\nnew file mode 120000\n--- "
                "/dev/null\n"
                "+++ b/strategies/link\n@@ -0,0 +1 @@\n+../tests\n"
            ),
            "diff.symlink",
        ),
        ("diff --git a/x.png b/x.png\nBinary files a/x.png and b/x.png differ\n", "diff.binary"),
    ],
)
def test_each_diff_rule_rejects_its_attack(text: str, rule: str) -> None:
    assert rule in rules(text)


def test_conftest_may_be_edited_in_test_gen_but_not_created() -> None:
    edit = (
        "--- a/tests/conftest.py\n+++ b/tests/conftest.py\n@@ -1 +1 @@\n-import "
        "pytest\n+import pytest  # ok\n"
    )
    assert rules(edit, TESTGEN) == set()
    assert rules(new_file("tests/sub/conftest.py"), TESTGEN) == {"diff.forbidden_file"}
    assert rules(new_file("tests/data.json", "{}"), TESTGEN) == set()  # data files are fine in T


def test_deleting_tests_is_rejected_in_both_phases() -> None:
    delete = "--- a/tests/test_smoke.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    assert "diff.deletes_test" in rules(delete, TESTGEN)
    assert "diff.deletes_test" in rules(delete, CODE)
    rename_in_t = (
        "diff --git a/tests/test_a.py b/tests/cases.py\nsimilarity index 100%\n"
        "rename from tests/test_a.py\nrename to tests/cases.py\n"
    )
    assert rules(rename_in_t, TESTGEN) == {"diff.deletes_test"}


def test_size_limits_count_bytes_files_and_hunks() -> None:
    assert rules(MODIFY, max_bytes=10) == {"diff.too_large"}
    assert rules(MODIFY + new_file("strategies/y.py"), max_files=1) == {"diff.too_large"}
    assert rules(MODIFY, max_hunks=0) == {"diff.too_large"}
    assert rules(MODIFY, max_bytes=10_000, max_files=1, max_hunks=1) == set()


def test_apply_tolerates_drift_and_reports_placed_lines(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    drifted = MODIFY.replace("@@ -15,3 +15,3 @@", "@@ -9,3 +9,3 @@")
    result = apply_patch(parse_patch(drifted), root)
    assert result.ok and result.written == ["strategies/momentum.py"]
    assert result.added_lines == {"strategies/momentum.py": {16}}
    assert "    chosen = list(ranked[:top_k])\n" in (root / "strategies/momentum.py").read_text()


def test_apply_tolerates_trailing_whitespace_differences(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sloppy = MODIFY.replace("reverse=True)\n", "reverse=True)   \n")
    assert apply_patch(parse_patch(sloppy), root).ok


def test_ambiguous_and_missing_context_fail_with_reasons(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / "strategies").mkdir(parents=True)
    (root / "strategies/m.py").write_text("a = 1\nb = 2\n" + "\n" * 100 + "a = 1\nb = 2\n")
    ambiguous = (
        "--- a/strategies/m.py\n+++ b/strategies/m.py\n@@ -52,2 +52,2 @@\n a = 1\n-b = 2\n+b = 3\n"
    )
    result = apply_patch(parse_patch(ambiguous), root)
    assert [v.rule for v in result.violations] == ["diff.hunk_failed"]
    assert "matches 2 places" in result.violations[0].message
    near = ambiguous.replace("@@ -52,2 +52,2 @@", "@@ -95,2 +95,2 @@")
    assert apply_patch(parse_patch(near), root).added_lines == {"strategies/m.py": {104}}
    missing = ambiguous.replace(" a = 1", " c = 9")
    failed = apply_patch(parse_patch(missing), root)
    assert "appear nowhere" in failed.violations[0].message
    assert (root / "strategies/m.py").read_text().count("b = 3") == 1  # all or nothing


def test_create_delete_rename_copy(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    text = (
        new_file("strategies/extra.py", "A = 1\nB = 2")
        + "--- a/strategies/__init__.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-\"\"\"Toy strategies "
        "package.\"\"\"\n"
        "diff --git a/strategies/momentum.py b/strategies/mom.py\nsimilarity index 100%\n"
        "rename from strategies/momentum.py\nrename to strategies/mom.py\n"
        "diff --git a/strategies/mom.py b/strategies/mom2.py\ncopy from strategies/mom.py\n"
        "copy to strategies/mom2.py\n"
    )
    result = apply_patch(parse_patch(text), root)
    assert result.ok, result.violations
    assert (root / "strategies/extra.py").read_text() == "A = 1\nB = 2\n"
    assert (
        not (root / "strategies/__init__.py").exists()
        and not (root / "strategies/momentum.py").exists()
    )
    assert (root / "strategies/mom.py").read_text() == (root / "strategies/mom2.py").read_text()
    assert sorted(result.deleted) == ["strategies/__init__.py", "strategies/momentum.py"]
    assert result.added_lines["strategies/extra.py"] == {1, 2}


@pytest.mark.parametrize(
    "text, reason",
    [
        (new_file("strategies/momentum.py"), "already exists"),
        (
            "--- a/strategies/gone.py\n+++ b/strategies/gone.py\n@@ -1 +1 @@\n-a\n+b\n",
            "does not exist",
        ),
        ("--- a/strategies/__init__.py\n+++ /dev/null\n@@ -0,0 +0,0 @@\n", "requires removing all"),
        (
            (
                "diff --git a/strategies/__init__.py b/strategies/momentum.py\nrename from "
                "strategies/__init__.py\n"
                "rename to strategies/momentum.py\n"
            ),
            "cannot overwrite",
        ),
        (
            (
                "--- a/strategies/__init__.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-\"\"\"Toy "
                "strategies package.\"\"\"\n"
                "--- a/strategies/__init__.py\n+++ b/strategies/__init__.py\n@@ -1 +1 @@\n-a\n+b\n"
            ),
            "deleted by an earlier entry",
        ),
    ],
)
def test_apply_refuses_impossible_entries(tmp_path: Path, text: str, reason: str) -> None:
    result = apply_patch(parse_patch(text), workspace(tmp_path))
    assert [v.rule for v in result.violations] == ["diff.hunk_failed"]
    assert reason in result.violations[0].message


def test_apply_never_writes_through_symlinks(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    os.symlink("../tests", root / "strategies" / "fixtures")
    through = MODIFY.replace("strategies/momentum.py", "strategies/fixtures/test_smoke.py")
    result = apply_patch(parse_patch(through), root)
    assert [v.rule for v in result.violations] == ["diff.symlink_write"]
    before = (STATIC / "workspaces/buggy/tests/test_smoke.py").read_text()
    assert (root / "tests/test_smoke.py").read_text() == before


@pytest.mark.parametrize(
    "case, rule",
    [
        ("72_dotdot_path", "diff.unclean_path"),
        ("74_dot_slash_path", "diff.unclean_path"),
        ("79_symlink_write_through", "diff.symlink"),
        ("80_git_binary_patch", "diff.binary"),
        ("82_old_new_name_choice", "diff.name_mismatch"),
    ],
)
def test_apply_refuses_public_attacks_on_its_own(tmp_path: Path, case: str, rule: str) -> None:
    root = workspace(tmp_path)
    result = apply_patch(parse_patch((REDTEAM / f"{case}.diff").read_text()), root)
    assert rule in {v.rule for v in result.violations}
    assert (root / "tests/test_momentum.py").read_text() == (
        STATIC / "workspaces/buggy/tests/test_momentum.py"
    ).read_text()


def test_no_newline_markers_and_crlf_files_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / "strategies").mkdir(parents=True)
    (root / "strategies/a.py").write_bytes(b"x = 1\r\ny = 2")
    text = (
        "--- a/strategies/a.py\n+++ b/strategies/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n"
        "\\ No newline at end of file\n+y = 3\n"
    )
    assert apply_patch(parse_patch(text), root).ok
    assert (root / "strategies/a.py").read_bytes() == b"x = 1\r\ny = 3\r\n"
    keep = (
        "--- a/strategies/a.py\n+++ b/strategies/a.py\n@@ -2 +2 @@\n-y = 3\n+y = 4\n"
        "\\ No newline at end of file\n"
    )
    assert apply_patch(parse_patch(keep), root).ok
    assert (root / "strategies/a.py").read_bytes() == b"x = 1\r\ny = 4"


def test_non_utf8_files_and_file_in_place_of_folder_are_reported(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "strategies/blob.py").write_bytes(b"\xff\xfe")
    text = "--- a/strategies/blob.py\n+++ b/strategies/blob.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert "not UTF-8" in apply_patch(parse_patch(text), root).violations[0].message
    blocked = apply_patch(parse_patch(new_file("strategies/momentum.py/inner.py")), root)
    assert "is a file, not a folder" in blocked.violations[0].message
    clash = new_file("strategies/new.py") + new_file("strategies/new.py/inner.py")
    written = apply_patch(parse_patch(clash), root)
    assert [v.rule for v in written.violations] == ["diff.write_failed"]


def test_header_only_entries_create_and_delete_empty_files(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "strategies/empty.py").write_text("")
    text = (
        "diff --git a/strategies/new.py b/strategies/new.py\nnew file mode 100644\n"
        "diff --git a/strategies/empty.py b/strategies/empty.py\ndeleted file mode 100644\n"
    )
    created, deleted = parse_patch(text)
    assert created.is_added and deleted.is_removed and deleted.source_path == "strategies/empty.py"
    result = apply_patch([created, deleted], root)
    assert result.ok and (root / "strategies/new.py").read_text() == ""
    assert not (root / "strategies/empty.py").exists()
    binary_gone = (
        "diff --git a/x.bin b/x.bin\ndeleted file mode 100644\nBinary files a/x.bin and "
        "/dev/null differ\n"
    )
    assert parse_patch(binary_gone)[0].is_removed


def test_odd_hunk_positions_still_place_by_context(tmp_path: Path) -> None:
    root = tmp_path / "w"
    (root / "strategies").mkdir(parents=True)
    (root / "strategies/a.py").write_text("x = 1\ny = 2\nz = 3\n")
    zero = "--- a/strategies/a.py\n+++ b/strategies/a.py\n@@ -0,1 +0,1 @@\n-x = 1\n+x = 5\n"
    assert apply_patch(parse_patch(zero), root).added_lines == {"strategies/a.py": {1}}
    middle_marker = (
        "--- a/strategies/a.py\n+++ b/strategies/a.py\n@@ -2 +2 @@\n-y = 2\n"
        "\\ No newline at end of file\n+y = 6\n"
    )
    assert apply_patch(parse_patch(middle_marker), root).ok
    assert (root / "strategies/a.py").read_text() == "x = 5\ny = 6\nz = 3\n"


def test_test_gen_may_add_data_fixtures_but_no_other_files() -> None:
    assert rules(new_file("tests/data/cases.json", '{"a": 1}\n'), TESTGEN) == set()
    assert rules(new_file("tests/data/prices.csv", "a,b\n1,2\n"), TESTGEN) == set()
    assert rules(new_file("tests/data/run.sh", "echo\n"), TESTGEN) == {"diff.non_data_fixture"}
    assert rules(new_file("tests/data/payload.pkl", "x\n"), TESTGEN) == {"diff.non_data_fixture"}


def test_new_test_modules_may_not_shadow_importable_modules() -> None:
    assert rules(new_file("tests/json.py"), TESTGEN) == {"diff.shadows_module"}
    assert rules(new_file("tests/unit/pytest.py"), TESTGEN) == {"diff.shadows_module"}
    assert rules(new_file("tests/helpers.py"), TESTGEN) == set()
