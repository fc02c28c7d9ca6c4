"""Red tests must also fail on trivial candidates the gate writes itself, served in place of S.

Each candidate is a copy of the workspace. Its source modules end with a few lines the gate
appends. They wrap every public function the module defines. They wrap every public method of a
class it defines, such as a strategy's `target_weights`. A weights answer is a dict of names to
numbers. Each candidate replaces it by one trivial answer built from it.
- No weights.
- Equal weights over the universe. The universe is the names of the answer. It also takes the
  names of the scores or holdings it was given, and a MarketView's symbols. This candidate is
  skipped where today's answer already holds every name. That happens when the mandate's slots
  outnumber the names.
- All weight on one name: the first name in sorted order. A second candidate takes the last.
Other answers pass through. A new red test that passes on a candidate encodes nothing that
candidate lacks: `redgreen.trivial`. One-name candidates come in pairs. A test is refused only when
it passes on both. So a test that wants one named stock is not refused for the name it wants.
Today's output unchanged is the current S, on which red tests must already fail.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

from guardrails.judging.gaterun import GateState
from guardrails.judging.mutant_check import MUTANT_TIME_LIMIT_S, PARALLEL, variant_workspace
from guardrails.sandbox import SuiteRequest, SuiteResult, run_suite
from guardrails.verdict import Violation

# candidate -> the expression that replaces a weights answer `out` over the names `names`
CANDIDATES = {
    "empty weights": "{}",
    # where today's S already holds every name, equal weights may well be the mandate's answer
    "equal weights over the universe": (
        "out if all(out.get(n, 0) > 0 for n in names) else {n: 1.0 / len(names) for n in names}"
    ),
    "all weight on the first name": "{n: float(n == names[0]) for n in names}",
    "all weight on the last name": "{n: float(n == names[-1]) for n in names}",
}
PAIRED = ("all weight on the first name", "all weight on the last name")
WRAPPER = '''

from collections.abc import Mapping as _gate_Mapping

from strategy_api import MarketView as _gate_MarketView


def _gate_trivial_answer(out, args, kwargs):
    if not isinstance(out, dict) or not all(isinstance(k, str) and isinstance(v, (int, float))
                                            and not isinstance(v, bool) for k, v in out.items()):
        return out
    names = set(out)
    for value in (*args, *kwargs.values()):
        if isinstance(value, _gate_Mapping) and all(isinstance(k, str) and (v is None or isinstance(
                v, (int, float)) and not isinstance(v, bool)) for k, v in value.items()):
            names |= set(value)  # scores or holdings, not panels keyed by field
        elif isinstance(value, _gate_MarketView):
            names |= {str(s) for s in value.symbols}
    names = sorted(names)
    if not names:
        return out
    return EXPRESSION


def _gate_trivial_wrap(function):
    def wrapped(*args, **kwargs):
        return _gate_trivial_answer(function(*args, **kwargs), args, kwargs)
    wrapped.__name__, wrapped.__doc__ = function.__name__, function.__doc__
    return wrapped


for _gate_name, _gate_value in list(globals().items()):
    if _gate_name.startswith("_") or getattr(_gate_value, "__module__", None) != __name__:
        continue
    if type(_gate_value).__name__ == "function":
        globals()[_gate_name] = _gate_trivial_wrap(_gate_value)
    elif isinstance(_gate_value, type):  # a strategy class: its public methods
        for _gate_method, _gate_code in list(vars(_gate_value).items()):
            if not _gate_method.startswith("_") and type(_gate_code).__name__ == "function":
                try:
                    setattr(_gate_value, _gate_method, _gate_trivial_wrap(_gate_code))
                except (AttributeError, TypeError):  # a class that refuses it stays as it is
                    pass
'''


def candidate_text(source: str, candidate: str) -> str:
    """The source module with the candidate's wrapper appended."""
    return source + WRAPPER.replace("EXPRESSION", CANDIDATES[candidate])


def trivial_violations(gate: GateState, red_ids: list[str]) -> list[Violation]:
    """Run the suite on each trivial candidate; red tests that pass on one are refused."""
    contract, ws = gate.contract, gate.dirs.ws
    sources = {
        path.relative_to(ws).as_posix(): path.read_text(encoding="utf-8")
        for tree in contract.source
        for path in sorted((ws / tree).rglob("*.py"))
    }

    def run(index: int) -> SuiteResult:
        candidate = list(CANDIDATES)[index]
        copy = variant_workspace(
            gate,
            f"trivial-{index}",
            {rel: candidate_text(text, candidate) for rel, text in sources.items()},
        )
        try:
            request = SuiteRequest(
                workspace=copy,
                tests=contract.tests,
                tag=f"trivial-{index}",
                sources=contract.source,
            )
            return run_suite(
                gate.lock,
                gate.dirs,
                request,
                memory_mb=contract.memory_limit_mb,
                timeout_s=min(contract.time_limit_s, MUTANT_TIME_LIMIT_S),
            )
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    with ThreadPoolExecutor(PARALLEL) as pool:
        suites = dict(zip(CANDIDATES, pool.map(run, range(len(CANDIDATES))), strict=True))
    found: list[Violation] = []
    for nodeid in red_ids:
        passed = [name for name, suite in suites.items() if suite.outcome(nodeid) == "passed"]
        if all(name in passed for name in PAIRED):
            passed = [name for name in passed if name != PAIRED[1]]
        else:
            passed = [name for name in passed if name not in PAIRED]
        if passed:
            found.append(
                Violation(
                    rule="redgreen.trivial",
                    path=nodeid.split("::")[0],
                    message=(
                        f"{nodeid} passes when the strategy answers with {passed[0]}: a "
                        "red test must "
                        "fail on trivial answers the mandate does not ask for, so it shows "
                        "what S must do"
                    ),
                )
            )
    return found
