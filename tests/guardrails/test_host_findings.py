"""Gaps the red-team corpus found in the gate's strategy host model, each pinned by a test."""

from __future__ import annotations

from pathlib import Path

from coverage import CoverageData

from guardrails.coverage_data import map_data


def test_coverage_parts_of_one_run_are_joined_not_replaced(tmp_path: Path) -> None:
    # test-gen measures S in the host and T in the test process: the second part must not erase
    # the first (S's coverage read 0 % and every honest test-gen patch was refused)
    for name, path in (("host", "/workspace/strategies/a.py"), ("tests", "/workspace/tests/t.py")):
        data = CoverageData(basename=str(tmp_path / name))
        data.add_lines({path: [1, 2]})
        data.write()
    target = tmp_path / "joined"
    map_data(tmp_path / "host", target, "/workspace", tmp_path / "ws")
    map_data(tmp_path / "tests", target, "/workspace", tmp_path / "ws")
    joined = CoverageData(basename=str(target))
    joined.read()
    assert sorted(joined.measured_files()) == [str(tmp_path / "ws/strategies/a.py"),
                                               str(tmp_path / "ws/tests/t.py")]
