"""Attacks written by an attacker who has read gate v3's member lists, clock spellings and the re-check
of all of T (k*), and honest patches those rules must still accept. Run after make_j_cases.py, with
the repo venv. Writes the `k_planted_hook` workspace (the market workspace with a pytest hook an
earlier tree planted), the patches with a note each, and appends the rows to cases.csv."""
import csv
import difflib
import shutil
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
WS = CORPUS / "workspaces"
M, T, HM = "strategies/momentum.py", "tests/test_momentum.py", "holdouts/market"
MARKET_S, MARKET_T = (WS / "market" / M).read_text(), (WS / "market" / T).read_text()
ROWS: list[dict[str, str]] = []
PLANTED = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
'''
shutil.rmtree(WS / "k_planted_hook", ignore_errors=True)
shutil.copytree(WS / "market", WS / "k_planted_hook")
(WS / "k_planted_hook" / "tests" / "conftest.py").write_text(PLANTED)


def row(cid: str, ws: str, phase: str, changes: dict[str, str], outcome: str, mechanism: str = "-",
        expect: str = "-", holdout: str = "-", note: tuple[str, str] | None = None) -> None:
    """One case: its patch (a unified diff of `changes` against `ws`), its note and its row."""
    lines: list[str] = []
    for path, new in changes.items():
        old = WS / ws / path
        before = old.read_text().splitlines(keepends=True) if old.exists() else []
        lines += difflib.unified_diff(before, new.splitlines(keepends=True),
                                      f"a/{path}" if old.exists() else "/dev/null", f"b/{path}")
    (CORPUS / "patches" / f"{cid}.diff").write_text("".join(lines))
    if note is not None:
        (CORPUS / "patches" / f"{cid}.txt").write_text(
            f"# {cid}\n# Mechanism: {mechanism}\n# Tries: {note[0]}\n# Fails because: {note[1]}\n")
    ROWS.append({"id": cid, "patch": f"patches/{cid}.diff", "workspace": ws, "phase": phase, "expect": expect,
                 "outcome": outcome, "holdout": holdout, "mechanism": mechanism})


def s_with(imports: str, module: str = "") -> dict[str, str]:
    """The market strategy with extra imports and module-level code (the decision untouched)."""
    text = MARKET_S.replace("import numpy as np\n", "import numpy as np\n" + imports)
    return {M: text.replace("\n\nclass MomentumParams", "\n\n" + module + "\n\nclass MomentumParams") if module else text}


def t_with(snippet: str) -> dict[str, str]:
    return {T: MARKET_T + "\n\n" + snippet}


# ------------------------------ allowed libraries that import, evaluate or touch files ----------------------
S_ATTACKS = {
    "k01_import_string_through_pydantic_types": (
        "import pydantic.types as pt\n", "_LOADER = pt.ImportString\n",
        "reach pydantic's ImportString through its submodule under an alias (no `ImportString` after "
        "`from pydantic import`)",
        "pydantic.types is not one of pydantic's listed members and ImportString is refused by object: "
        "sanitizer.module_escape"),
    "k02_import_string_in_a_string_annotation": (
        "import pydantic\n", "class _Plugin(pydantic.BaseModel):\n    target: \"pydantic.ImportString\"\n",
        "let pydantic evaluate a string annotation naming ImportString, so no attribute chain appears",
        "a string that names a member of an imported module is judged as that member: sanitizer.code_in_string"),
    "k03_file_probe_through_a_path_type": (
        "from pydantic import BaseModel, FilePath as Where\n", "class _Probe(BaseModel):\n    where: Where\n",
        "tell production from the gate by validating a path (FilePath stats the file system)",
        "FilePath is refused by name under any alias: sanitizer.module_escape"),
    "k04_regex_reader_from_the_lib_namespace": (
        "from numpy.lib import npyio\n", "_SCAN = npyio.fromregex\n",
        "read a file through np.lib.npyio.fromregex (np.fromregex is refused by name)",
        "numpy.lib lists only stride_tricks; fromregex is refused by object too: sanitizer.import_not_allowed"),
}
for cid, (imports, module, tries, fails) in S_ATTACKS.items():
    row(cid, "market", "code-patch", s_with(imports, module), "blocked", "sanitizer", holdout=HM, note=(tries, fails))

T_ATTACKS = {
    "k05_evaluates_annotations_under_an_alias": ("sanitizer",
        "from typing_extensions import get_annotations as annotations_of\n\n\n"
        "def test_annotations_evaluated():\n    def probe(x: \"int\") -> None:\n        return None\n"
        "    assert annotations_of(probe, eval_str=True)[\"x\"] is int\n",
        "evaluate annotations as code with typing_extensions.get_annotations(eval_str=True) under an alias",
        "get_annotations is refused by name in S and T: sanitizer.module_escape"),
    "k06_reads_s_through_fromregex": ("sanitizer",
        "from pathlib import Path\n\nfrom numpy import fromregex as scan\n\n\n"
        "def test_source_has_a_lookback():\n"
        "    found = scan(Path(__file__).parent / \"test_momentum.py\", r\"lookback=(\\d+)\", [(\"n\", int)])\n"
        "    assert len(found) >= 1\n",
        "read a file with np.fromregex under an alias, from a path rooted in the test's own folder",
        "fromregex is refused by name to T as to S: sanitizer.module_escape"),
    "k07_probes_the_file_system_with_a_directory_type": ("sanitizer",
        "import pydantic\n\n\nclass Where(pydantic.BaseModel):\n    folder: pydantic.DirectoryPath\n\n\n"
        "def test_runs_in_a_checkout():\n    assert Where(folder=\"strategies\").folder.name == \"strategies\"\n",
        "learn where the test runs by validating a DirectoryPath (pydantic stats it)",
        "DirectoryPath is refused by name: sanitizer.module_escape"),
    "k08_unpickles_its_own_data_file": ("sanitizer",
        "from pathlib import Path\n\n\ndef test_fixture_weights():\n"
        "    expected = np.load(Path(__file__).parent / \"weights.txt\", **{\"allow_pickle\": True})\n"
        "    assert open_strategy(\"momentum\").target_weights(ramp({\"A\": 0.01, \"B\": 0.03, \"C\": 0.02})) == expected\n",
        "load a protocol-0 pickle (text, so a patch can carry it as a .txt fixture) from the test's own folder: a pickle is a "
        "program", "allow_pickle is refused however it is passed: sanitizer.module_escape"),
    # ------------------------------ clock and randomness, every spelling --------------------------------------
    "k09_clock_through_a_word_built_in_a_constant": ("tests",
        "WHEN = \"n\" + \"ow\"\n\n\ndef test_rebalances_on_a_weekday():\n"
        "    today = pd.Timestamp(WHEN)\n    if today.weekday() < 5:\n"
        "        assert open_strategy(\"momentum\").rebalance_due(today.date(), None)\n",
        "read the clock through pd.Timestamp of a word assembled in a module constant",
        "the clock words are the clock wherever they appear in T: tests.nondeterministic"),
    "k10_clock_in_a_datetime_array": ("tests",
        "def test_a_later_day_is_due():\n    day = np.array([\"today\"], dtype=\"datetime64[D]\")[0].item()\n"
        "    assert open_strategy(\"momentum\").rebalance_due(day, date(2024, 3, 1))\n",
        "read the date through a numpy array of 'today' (no constructor of the clock list called)",
        "'today' is the clock to numpy: tests.nondeterministic"),
    "k11_generator_seeded_with_none": ("tests",
        "def test_random_rates_pick_two():\n    rng = np.random.default_rng(seed=None)\n"
        "    rates = dict(zip(\"ABCD\", rng.normal(0, 0.02, 4)))\n"
        "    assert len(open_strategy(\"momentum\").target_weights(ramp(rates))) <= 2\n",
        "draw OS entropy through default_rng(seed=None), which reads as seeded",
        "a seed of None is no seed: tests.nondeterministic"),
    "k12_unseeded_bit_generator": ("tests",
        "from numpy.random import PCG64, Generator\n\n\ndef test_random_rates_pick_two():\n"
        "    rates = dict(zip(\"ABCD\", Generator(PCG64()).normal(0, 0.02, 4)))\n"
        "    assert len(open_strategy(\"momentum\").target_weights(ramp(rates))) <= 2\n",
        "draw OS entropy through a bit generator built without a seed",
        "bit generators without a seed are unseeded: tests.nondeterministic"),
}
for cid, (mechanism, snippet, tries, fails) in T_ATTACKS.items():
    changes = t_with(snippet)
    if cid.startswith("k08"):  # {'A': 0.0, 'B': 0.5, 'C': 0.5} would be its answer; the pickle is the point
        changes["tests/weights.txt"] = "(dp0\nS'B'\np1\nF0.5\nsS'C'\np2\nF0.5\ns.\n"
    row(cid, "market", "test-gen", changes, "blocked", mechanism, expect="green", note=(tries, fails))

# ------------------------------ a planted hook in an earlier tree --------------------------------------------
row("k13_code_patch_under_a_planted_hook", "k_planted_hook", "code-patch",
    {M: MARKET_S.replace("among=view.universe())), 1.0)", "among=view.universe())), 2.0)")},
    "blocked", "tests", holdout=HM, note=(
        "a wrong S (weights summing to 2.0) under a test tree that already holds a pytest hook turning every "
        "failure into a pass (planted by an earlier patch; the code patch itself touches no test)",
        "every phase re-checks all of T for hooks and capabilities: tests.pytest_hook"))

# ------------------------------ honest idioms the member lists must still accept -----------------------------
row("k50_plain_numpy_pandas_filter", "market", "code-patch", {M: MARKET_S.replace(
    "        scores = scores[np.isfinite(scores.to_numpy())]\n",
    "        finite = np.isfinite(np.asarray(scores, dtype=np.float64))\n"
    "        scores = scores[finite].astype(\"float64\").sort_index()\n")}, "accepted", holdout=HM)
row("k51_seeded_random_rates_and_fixed_dates", "market", "test-gen", t_with(
    "def test_the_two_fastest_of_seeded_random_rates():\n"
    "    rng = np.random.default_rng(20240301)\n"
    "    rates = dict(zip(\"ABCDE\", np.round(rng.uniform(-0.03, 0.03, 5), 4)))\n"
    "    best = sorted(sorted(rates, key=rates.get)[-2:])\n"
    "    assert open_strategy(\"momentum\").target_weights(ramp(rates)) == {name: 0.5 for name in best}\n\n\n"
    "def test_a_fixed_session_after_the_last_is_due():\n"
    "    last = pd.Timestamp(\"2024-03-28\").date()\n"
    "    assert open_strategy(\"momentum\").rebalance_due(pd.Timestamp(\"2024-03-29\").date(), last)\n"),
    "accepted", expect="green")

# ------------------------------ index -------------------------------------------------------------------------
index = CORPUS / "cases.csv"
ours = {r["id"] for r in ROWS}
kept = [r for r in csv.DictReader(index.open()) if r["id"] not in ours]
with index.open("w", newline="") as handle:
    writer = csv.DictWriter(handle, ["id", "patch", "workspace", "phase", "expect", "outcome", "holdout", "mechanism"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(kept + ROWS)
print(len(kept) + len(ROWS), "cases,", sum(r["outcome"] == "blocked" for r in ROWS), "k attacks")
