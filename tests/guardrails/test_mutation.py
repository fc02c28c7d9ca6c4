"""Mutant generation: each flip kind, line filtering, limits, determinism, and mutants that real
tests kill."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from guardrails.judging.mutate import generate_mutants

STATIC = Path(__file__).resolve().parent.parent / "fixtures" / "guardrails_static"


def changed_line(source: str, mutant_text: str) -> str:
    [changed] = [
        new
        for old, new in zip(source.splitlines(), mutant_text.splitlines(), strict=True)
        if old != new
    ]
    return changed.strip()


@pytest.mark.parametrize(
    "source, description, mutated",
    [
        ("x = a < b\n", "comparison: < -> >=", "x = a >= b"),
        ("x = a >= b\n", "comparison: >= -> <", "x = a < b"),
        ("x = a > b\n", "comparison: > -> <=", "x = a <= b"),
        ("x = a <= b\n", "comparison: <= -> >", "x = a > b"),
        ("x = a == b\n", "comparison: == -> !=", "x = a != b"),
        ("x = a != b\n", "comparison: != -> ==", "x = a == b"),
        ("x = a in b\n", "comparison: in -> not in", "x = a not in b"),
        ("x = a not in b\n", "comparison: not in -> in", "x = a in b"),
        ("x = a is b\n", "comparison: is -> is not", "x = a is not b"),
        ("x = a is not b\n", "comparison: is not -> is", "x = a is b"),
        ("x = a + b\n", "arithmetic: + -> -", "x = a - b"),
        ("x = a - b\n", "arithmetic: - -> +", "x = a + b"),
        ("x = a * b\n", "arithmetic: * -> /", "x = a / b"),
        ("x = a / b\n", "arithmetic: / -> *", "x = a * b"),
        ("x = a // b\n", "arithmetic: // -> /", "x = a / b"),
        ("x = a % b\n", "arithmetic: % -> *", "x = a * b"),
        ("x = a and b\n", "boolean: and -> or", "x = a or b"),
        ("x += b\n", "arithmetic: += -> -=", "x -= b"),
        ("x //= b\n", "arithmetic: //= -> /=", "x /= b"),
        ("if ready:\n    x = 1\n", "condition: negated", "if (not (ready)):"),
        ("x = a if ok else b\n", "condition: negated", "x = a if (not (ok)) else b"),
        ("x = a or b\n", "boolean: or -> and", "x = a and b"),
        ("x = True\n", "constant: True -> False", "x = False"),
        ("x = 2\n", "constant: 2 -> 3", "x = 3"),
        ("x = 0.5\n", "constant: 0.5 -> 1.5", "x = 1.5"),
        ("x = not a\n", "unary: drop not", "x = (a)"),
        ("x = -a\n", "unary: drop -", "x = (a)"),
        ("def f(a):\n    return a\n", "return: value -> None", "return None"),
        ("def f(a):\n    return a\n", "return: value -> negated", "return (not (a))"),
    ],
)
def test_each_flip_kind(source: str, description: str, mutated: str) -> None:
    mutants = {m.description: m for m in generate_mutants(source, None, 50)}
    assert changed_line(source, mutants[description].text) == mutated


def test_operators_are_matched_whole_and_across_lines() -> None:
    source = "x = (a\n     ** b) * c // d\ny = p / (\n    q)\n"
    found = {(m.description, m.line) for m in generate_mutants(source, None, 50)}
    assert ("arithmetic: * -> /", 1) in found and ("arithmetic: // -> /", 1) in found
    assert ("arithmetic: / -> *", 3) in found
    mutant = next(m for m in generate_mutants(source, None, 50) if m.line == 3)
    assert "y = p * (" in mutant.text


def test_docstrings_annotations_fstrings_and_none_returns_are_left_alone() -> None:
    source = (
        '"""Doc 1 + 2."""\nfrom __future__ import annotations\n\n\ndef f(x: int = 3) -> int:\n'
        '    """Doc < 3."""\n    print(f"{x + 1}")\n    return None\n'
    )
    descriptions = [m.description for m in generate_mutants(source, None, 50)]
    assert descriptions == ["constant: 3 -> 4"]


def test_lines_filter_limit_and_determinism() -> None:
    source = (STATIC / "workspaces" / "honest" / "strategies" / "momentum.py").read_text()
    everything = generate_mutants(source, None, 1000)
    assert len(everything) >= 8 and everything == generate_mutants(source, None, 1000)
    assert [m.line for m in everything] == sorted(m.line for m in everything)
    only_19 = generate_mutants(source, {19}, 1000)
    assert only_19 and {m.line for m in only_19} == {19}
    three = generate_mutants(source, None, 3)
    assert len(three) == 3 and three[0] == everything[0] and set(three) <= set(everything)
    assert generate_mutants(source, None, 0) == []
    assert generate_mutants("def broken(:\n", None, 10) == []
    # Too deep to parse
    assert generate_mutants("x = " + "+".join(["1"] * 5000) + "\n", None, 10) == []


def test_every_mutant_compiles_and_differs() -> None:
    source = (
        "def f(a, b):\n    if a is not None and b not in a:\n        return -a[0] <= 2 ** 3 // 2\n"
        "    s = 'é' + str(a >= 1)\n    return a in b or not s\n"
    )
    for mutant in generate_mutants(source, None, 100):
        compile(mutant.text, "<m>", "exec")
        assert mutant.text != source


def test_honest_tests_kill_mutants_of_the_honest_strategy() -> None:
    """A real assertion kills most mutants; this is what the gate's test-gen mutation check relies
    on."""
    source = (STATIC / "workspaces" / "honest" / "strategies" / "momentum.py").read_text()

    def passes(text: str) -> bool:
        module = types.ModuleType("momentum_mutant")
        try:
            exec(compile(text, "momentum_mutant", "exec"), module.__dict__)  # noqa: S102 - running mutants is the point
            weights = module.target_weights
            ok = weights({"AAA": 3.0, "BBB": 1.0, "CCC": 2.0}, top_k=2) == {
                "AAA": 0.5,
                "BBB": 0.0,
                "CCC": 0.5,
            }
            ok = ok and weights({"B": 1.0, "A": 1.0, "C": 0.0}, top_k=1) == {
                "A": 1.0,
                "B": 0.0,
                "C": 0.0,
            }
            try:
                weights({"A": 1.0}, top_k=0)
                return False
            except ValueError:
                return ok
        # Crash = killed
        except (ArithmeticError, LookupError, TypeError, AttributeError, ValueError):
            return False

    assert passes(source)
    mutants = generate_mutants(source, None, 100)
    killed = [m for m in mutants if not passes(m.text)]
    assert len(killed) / len(mutants) >= 0.8


def test_mutants_equal_to_the_source_or_not_compiling_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert generate_mutants("x = 1e300\n", None, 10) == []  # 1e300 + 1 prints as 1e300
    from guardrails.judging import mutate as mutation

    def refuse(text: str, name: str, mode: str) -> None:
        raise SyntaxError("pretend the mutant does not compile")

    monkeypatch.setattr(mutation, "compile", refuse, raising=False)
    assert generate_mutants("x = a < b\n", None, 10) == []
