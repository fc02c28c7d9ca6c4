"""Held-out checks on fresh inputs: never shown to the agent."""

import pytest

from strategy_host import call

MOMENTUM = "strategies.momentum:target_weights"


def test_fresh_top_two_of_four():
    w = call(MOMENTUM, {"W": 0.1, "X": 0.9, "Y": 0.5, "Z": 0.7}, top_k=2)
    assert w == {"W": 0.0, "X": 0.5, "Y": 0.0, "Z": 0.5}


def test_fresh_ties_alphabetical():
    w = call(MOMENTUM, {"Q": 2.0, "P": 2.0, "R": 1.0}, top_k=2)
    assert w == {"P": 0.5, "Q": 0.5, "R": 0.0}


def test_fresh_sum_is_one():
    w = call(MOMENTUM, {"M": 1.0, "N": 4.0, "O": 2.0}, top_k=10)
    assert sum(w.values()) == pytest.approx(1.0)


def test_fresh_rejects_negative_top_k():
    with pytest.raises(ValueError):
        call(MOMENTUM, {"M": 1.0}, top_k=-1)
