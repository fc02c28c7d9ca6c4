"""The outer loop's signal (paper Eq. 1-2): friction-aware step reward, terminal penalty, principal
loss, sim-to-real gap.

Eq. 1: R~_t = sum_i w_i r_i - F_exec(dw_t), F_exec = lambda ||dw||_1 + gamma sqrt(||dw||_1).
Eq. 2: R_t = R~_t. The principal loss is L_t = 1 - W_t / W_0. On the step where it reaches tau
(the absorbing state), R_t = R~_t - P_terminal. gamma's default is calibrated from the impact model
(`calibrated_gamma`, derivation in docs/portfolio.md).
"""

from __future__ import annotations

import math

import numpy as np

from oomrl.calibration import (  # re-exported: the defaults sit below the settings, which read them
    DEFAULT_GAMMA,
    DEFAULT_LAMBDA,
    DEFAULT_TERMINAL_PENALTY,
    REFERENCE_ADV,
    REFERENCE_NAMES,
    REFERENCE_NAV,
    REFERENCE_SIGMA,
    REFERENCE_TURNOVER,
    calibrated_gamma,
)

__all__ = [
    "DEFAULT_GAMMA",
    "DEFAULT_LAMBDA",
    "DEFAULT_TERMINAL_PENALTY",
    "REFERENCE_ADV",
    "REFERENCE_NAMES",
    "REFERENCE_NAV",
    "REFERENCE_SIGMA",
    "REFERENCE_TURNOVER",
    "calibrated_gamma",
    "terminal",
    "execution_penalty",
    "step_reward",
    "principal_loss",
    "frictionless_return",
]


def terminal(
    rewards: np.ndarray, losses: np.ndarray, threshold: float, penalty: float
) -> np.ndarray:
    """Eq. 2 over consecutive steps: -penalty added on the first step whose loss reaches the
    threshold."""
    out = np.asarray(rewards, dtype=float).copy()
    hits = np.flatnonzero(np.asarray(losses, dtype=float) >= threshold)
    if len(hits):
        out[hits[0]] -= penalty
    return out


def execution_penalty(turnover: float, lam: float, gamma: float) -> float:
    """F_exec(dw) = lambda * ||dw||_1 + gamma * sqrt(||dw||_1): fees plus impact, in return
    units."""
    if turnover < 0 or lam < 0 or gamma < 0:
        raise ValueError(f"turnover, lambda and gamma must be >= 0, got {turnover}, {lam}, {gamma}")
    return lam * turnover + gamma * math.sqrt(turnover)


def step_reward(gross_return: float, turnover: float, lam: float, gamma: float) -> float:
    """R~_t = sum_i w_i r_i - F_exec(dw_t): the weighted return before costs less the penalty."""
    return gross_return - execution_penalty(turnover, lam, gamma)


def principal_loss(nav: float, initial: float) -> float:
    """L_t = 1 - W_t / W_0 (negative while the account is above its starting capital)."""
    if initial <= 0:
        raise ValueError(f"initial capital must be > 0, got {initial}")
    return 1.0 - nav / initial


def frictionless_return(
    held: np.ndarray,
    cash: float,
    nav_prev: float,
    weights: np.ndarray,
    fill_price: np.ndarray,
    close: np.ndarray,
    last_price: np.ndarray,
) -> float:
    """Return of a rebalance day had the targets filled exactly at the fill price without any cost.

    Old holdings move from the previous close to the fill price. From there the ideal book (target
    weights, rest in cash) moves to the close. Names without a price that day are carried flat.
    """
    if nav_prev <= 0:
        raise ValueError(f"previous NAV must be > 0, got {nav_prev}")
    at_fill = np.where(np.isfinite(fill_price), fill_price, last_price)
    at_fill = np.where(np.isfinite(at_fill), at_fill, 0.0)
    value_at_fill = cash + float(np.dot(held, at_fill))
    with np.errstate(invalid="ignore", divide="ignore"):
        growth = np.where(np.isfinite(close) & (at_fill > 0), close / at_fill, 1.0)
    invested = float(weights.sum())
    ideal = float(np.dot(weights, growth)) + (1.0 - invested)
    return value_at_fill / nav_prev * ideal - 1.0
