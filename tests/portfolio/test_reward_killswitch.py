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
    terminal,
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
    r = frictionless_return(
        np.array([100.0]),
        1000.0,
        2000.0,
        np.array([0.5]),
        np.array([11.0]),
        np.array([12.0]),
        np.array([10.0]),
    )
    assert r == pytest.approx(1.05 * (0.5 * 12 / 11 + 0.5) - 1)
    flat = frictionless_return(
        np.array([100.0]),
        0.0,
        1000.0,
        np.array([1.0]),
        np.array([np.nan]),
        np.array([np.nan]),
        np.array([10.0]),
    )
    assert flat == pytest.approx(0.0)  # suspended all day: carried at the last price
    with pytest.raises(ValueError):
        frictionless_return(
            np.array([1.0]),
            0.0,
            0.0,
            np.array([0.0]),
            np.array([1.0]),
            np.array([1.0]),
            np.array([1.0]),
        )


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


def test_the_terminal_penalty_lands_on_the_first_step_at_or_beyond_tau() -> None:
    rewards = terminal(
        np.array([0.01, -0.02, -0.05, -0.01]), np.array([0.05, 0.15, 0.21, 0.25]), 0.2, 1.0
    )
    assert rewards.tolist() == pytest.approx([0.01, -0.02, -1.05, -0.01])
    assert terminal(np.array([0.01]), np.array([0.1]), 0.2, 1.0).tolist() == [0.01]


def test_the_reward_on_a_halt_day_includes_minus_p_terminal() -> None:
    from oomrl.market.rules import AShareRules, FillPrice
    from oomrl.portfolio.replay import replay
    from tests.portfolio.factories import flat_panels
    from tests.portfolio.inprocess import InProcessStrategy

    panels = flat_panels(["600000.SH", "600036.SH"], days=40)
    crash = panels["close"].index[31]
    for field in ("open", "high", "low", "close"):
        # -30 % (a resumption gap: validation is not the broker's job)
        panels[field].loc[crash:] = 7.0
    panels["prev_close_raw"].loc[crash:] = np.nan
    rules = AShareRules(fill_price=FillPrice.CLOSE, price_limits=False)
    lam, gamma = 0.0015, 0.0005
    result = replay(
        InProcessStrategy.bundled("daily_momentum"),
        {"top_k": 2},
        panels,
        panels["close"].index[25],
        panels["close"].index[39],
        rules,
        1_000_000,
        lam,
        gamma,
        terminal_penalty=2.5,
    )
    halt = result.nav.iloc[-1]
    assert result.halted_on == crash.date() and halt["principal_loss"] >= 0.2
    expected = (
        step_reward(
            halt["realized_return"] + halt["costs"] / (halt["nav"] / (1 + halt["realized_return"])),
            halt["turnover"],
            lam,
            gamma,
        )
        - 2.5
    )
    assert halt["reward"] == pytest.approx(expected)
    # Only the absorbing step carries the penalty
    assert (result.nav["reward"].iloc[:-1] > -1).all()


def test_gamma_is_calibrated_from_the_impact_model_and_the_sample() -> None:
    from oomrl.market.rules import AShareRules
    from oomrl.portfolio.reward import (
        DEFAULT_GAMMA,
        REFERENCE_ADV,
        REFERENCE_NAMES,
        REFERENCE_NAV,
        REFERENCE_SIGMA,
        calibrated_gamma,
    )
    from oomrl.settings import OomrlSettings

    k = AShareRules().impact_k
    assert calibrated_gamma(k) == pytest.approx(
        k * REFERENCE_SIGMA * np.sqrt(REFERENCE_NAV / (REFERENCE_NAMES * REFERENCE_ADV))
    )
    assert (
        pytest.approx(calibrated_gamma(k), abs=5e-7) == DEFAULT_GAMMA
        and OomrlSettings().market.reward_gamma == DEFAULT_GAMMA
    )
    assert DEFAULT_GAMMA > 0 and calibrated_gamma(k, turnover=0.5) == pytest.approx(
        DEFAULT_GAMMA / 2, rel=1e-3
    )
    with pytest.raises(ValueError):
        calibrated_gamma(k, sigma=0.0)


@pytest.mark.slow
def test_the_calibration_references_are_the_samples_medians() -> None:
    import pandas as pd

    from oomrl.portfolio.book import Membership
    from oomrl.portfolio.reward import REFERENCE_ADV, REFERENCE_SIGMA
    from tests.portfolio.test_sample_replay import sample_market

    market, membership = sample_market()
    pit = Membership.of(membership)
    assert pit is not None
    sigma, adv = [], []
    for t, day in enumerate(market.dates):
        if day >= pd.Timestamp("2024-07-01"):
            cols = market.symbols.get_indexer(pit.on(day))
            sigma.append(market.sigma[t, cols[cols >= 0]])
            adv.append(market.adv[t, cols[cols >= 0]])
    assert np.nanmedian(np.concatenate(sigma)) == pytest.approx(REFERENCE_SIGMA, rel=0.02)
    assert np.nanmedian(np.concatenate(adv)) == pytest.approx(REFERENCE_ADV, rel=0.02)
