"""The reward's default frictions, gamma calibrated from the impact model (derivation in
docs/portfolio.md)."""

from __future__ import annotations

import math

DEFAULT_LAMBDA = 0.0015
# One unit of starting capital: ruin outweighs any single step's return
DEFAULT_TERMINAL_PENALTY = 1.0
# Reference values of the calibration, measured on the bundled sample.
# The sample is CSI 300 point-in-time members, 2024-07-01..2026-02-27.
# Values: median daily volatility and median 20-session ADV (CNY) of a member-day.
# Also the default book (10 M CNY) and a typical number of names held. See docs/portfolio.md.
REFERENCE_SIGMA = 0.0177
REFERENCE_ADV = 6.8e8
REFERENCE_NAV = 10_000_000.0
REFERENCE_NAMES = 20
REFERENCE_TURNOVER = 1.0


def calibrated_gamma(
    impact_k: float = 1.0,
    sigma: float = REFERENCE_SIGMA,
    adv: float = REFERENCE_ADV,
    nav: float = REFERENCE_NAV,
    names: int = REFERENCE_NAMES,
    turnover: float = REFERENCE_TURNOVER,
) -> float:
    """gamma such that gamma * sqrt(T) equals the impact model's cost at the reference turnover T.

    The broker's impact on a trade of value q is k * sigma * sqrt(q / ADV) per unit traded.
    Take a rebalance of turnover T spread over `names` equal trades of q = T * nav / names.
    It costs k * sigma * sqrt(nav / (names * ADV)) * T^1.5 of NAV.
    That equals gamma * sqrt(T) at T = turnover, so
    gamma = k * sigma * sqrt(nav / (names * ADV)) * turnover.
    """
    if min(sigma, adv, nav, names, turnover) <= 0 or impact_k < 0:
        raise ValueError(
            "calibration needs positive sigma, ADV, NAV, names and turnover, and k >= 0"
        )
    return impact_k * sigma * math.sqrt(nav / (names * adv)) * turnover


DEFAULT_GAMMA = round(calibrated_gamma(), 6)
