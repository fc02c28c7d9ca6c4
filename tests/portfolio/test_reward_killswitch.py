"""Paper Eq. 1-2 by hand, the sim-to-real return, and the absorbing HALTED state."""

from __future__ import annotations

import numpy as np
import pytest

from oomrl.errors import AccountHaltedError
from oomrl.portfolio.killswitch import AccountStatus, KillSwitch, require_active
from oomrl.portfolio.reward import (
    execution_penalty,
    frictionless_return,
    principal_loss,
    step_reward,
)


def test_reward_is_weighted_return_less_linear_and_sqrt_penalty() -> None:
    assert execution_penalty(0.5, 0.0015, 0.001) == pytest.approx(0.00075 + 0.001 * np.sqrt(0.5))
    assert step_reward(0.01, 0.5, 0.0015, 0.0) == pytest.approx(0.01 - 0.00075)
    with pytest.raises(ValueError):
        execution_penalty(-0.1, 0.0015, 0.0)


def test_principal_loss() -> None:
    assert principal_loss(800_000, 1_000_000) == pytest.approx(0.2)
    assert principal_loss(1_100_000, 1_000_000) == pytest.approx(-0.1)
    with pytest.raises(ValueError):
        principal_loss(1.0, 0.0)


def test_frictionless_return_by_hand() -> None:
    # 100 shares held from a 10.00 close; they open (fill) at 11.00 and close at 12.00.
    # NAV 2,000 = 1,000 cash + 1,000 stock. At the fill: 1,000 + 1,100 = 2,100 (+5 %).
    # Target: 50 % in the name (12/11 growth), 50 % cash: 0.5 * 12/11 + 0.5.
    r = frictionless_return(np.array([100.0]), 1000.0, 2000.0, np.array([0.5]), np.array([11.0]),
                            np.array([12.0]), np.array([10.0]))
    assert r == pytest.approx(1.05 * (0.5 * 12 / 11 + 0.5) - 1)
    flat = frictionless_return(np.array([100.0]), 0.0, 1000.0, np.array([1.0]), np.array([np.nan]),
                               np.array([np.nan]), np.array([10.0]))
    assert flat == pytest.approx(0.0)  # suspended all day: carried at the last price
    with pytest.raises(ValueError):
        frictionless_return(np.array([1.0]), 0.0, 0.0, np.array([0.0]), np.array([1.0]),
                            np.array([1.0]), np.array([1.0]))


def test_halted_is_absorbing() -> None:
    switch = KillSwitch(0.2)
    assert switch.next_status(AccountStatus.ACTIVE, 0.19) is AccountStatus.ACTIVE
    assert switch.next_status(AccountStatus.ACTIVE, 0.20) is AccountStatus.HALTED
    assert switch.next_status(AccountStatus.HALTED, -0.5) is AccountStatus.HALTED
    assert "20%" in switch.reason(0.21)
    with pytest.raises(ValueError):
        KillSwitch(0.0)


def test_require_active_refuses_a_halted_account() -> None:
    require_active("acc", AccountStatus.ACTIVE)
    with pytest.raises(AccountHaltedError, match="--confirm"):
        require_active("acc", AccountStatus.HALTED, "loss 25%")
