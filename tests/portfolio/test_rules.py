"""Hand-computed A-share fees (docs/architecture.md §5) and the impact model."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomrl.market.rules import AShareRules, Side, cents_array, to_cents

RULES = AShareRules()


def test_commission_is_a_quarter_basis_point_rate_with_a_five_yuan_minimum() -> None:
    assert RULES.commission(100_000) == Decimal("25.00")
    assert RULES.commission(10_000) == Decimal("5.00")  # 2.50 < minimum
    assert RULES.commission(0) == Decimal("0.00")


def test_stamp_duty_is_sell_only_and_halved_on_2023_08_28() -> None:
    assert RULES.stamp_duty(100_000, Side.SELL, date(2023, 8, 28)) == Decimal("50.00")
    assert RULES.stamp_duty(100_000, Side.SELL, date(2023, 8, 25)) == Decimal("100.00")
    assert RULES.stamp_duty(100_000, Side.BUY, date(2024, 1, 2)) == Decimal("0.00")


def test_transfer_fee_on_both_sides() -> None:
    assert RULES.transfer_fee(100_000) == Decimal("1.00")
    assert RULES.transfer_fee(9_995) == Decimal("0.10")  # 0.09995 rounds half-up to the fen


def test_vector_fees_match_the_exact_rules() -> None:
    values = np.array([0.0, 10_000.0, 100_000.0, 9_995.0])
    commission, stamp, transfer = RULES.fees(
        values, np.array([False, True, True, True]), date(2024, 1, 2)
    )
    assert commission.tolist() == [0.0, 5.0, 25.0, 5.0]
    assert stamp.tolist() == [0.0, 5.0, 50.0, 5.0]
    assert transfer.tolist() == [0.0, 0.1, 1.0, 0.1]


@given(st.decimals(min_value=0, max_value=10**8, places=2))
def test_vector_rounding_agrees_with_decimal_half_up(value: Decimal) -> None:
    for rate in (RULES.commission_rate, RULES.stamp_duty_rate, RULES.transfer_fee_rate):
        exact = to_cents(value * Decimal(str(rate)))
        assert cents_array(np.array([float(value) * rate]))[0] == pytest.approx(
            float(exact), abs=1e-9
        )


def test_impact_is_half_spread_plus_k_sigma_sqrt_participation() -> None:
    rate = AShareRules(impact_k=1.0, half_spread=0.0005).impact_rate(
        np.array([0.02, np.nan]), np.array([0.04, 0.04])
    )
    assert rate[0] == pytest.approx(0.0005 + 0.02 * 0.2)
    assert rate[1] == pytest.approx(0.0005)  # unknown volatility: spread only


def test_rules_are_validated_and_frozen() -> None:
    with pytest.raises(ValueError):
        AShareRules(max_adv_participation=0)
    with pytest.raises(ValueError):
        AShareRules(fill_price="midpoint")
    with pytest.raises(ValueError):
        RULES.lot_size = 1  # type: ignore[misc]


def test_finite_is_nan_to_num_and_returns_finite_arrays_untouched() -> None:
    from oomrl.market.rules import finite

    clean = np.array([1.0, 2.5])
    assert finite(clean) is clean
    dirty = np.array([np.nan, np.inf, -np.inf, 3.0])
    assert np.array_equal(finite(dirty), np.nan_to_num(dirty))
