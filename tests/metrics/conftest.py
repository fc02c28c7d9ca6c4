"""Shared inputs of the metrics tests: the bundled CSI 300 fixtures and seeded random series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"
CSI300_PRICE = FIXTURES / "csi300_price_2024-06_2026-03.csv"
CSI300_TOTAL_RETURN = FIXTURES / "csi300_total_return_2024-06_2026-03.csv"
TABLE1_PHASES = FIXTURES / "table1_phases.csv"


def random_pair(seed: int, n: int = 300) -> tuple[pd.Series, pd.Series]:
    """A benchmark and a portfolio with beta 0.8, some alpha and autocorrelated noise."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2024-01-02", periods=n)
    bench = pd.Series(rng.normal(0.0004, 0.012, n), index=dates, name="benchmark")
    noise = pd.Series(rng.normal(0.0, 0.006, n), index=dates).rolling(3, min_periods=1).mean()
    port = (0.0002 + 0.8 * bench + noise).rename("returns")
    return port, bench


@pytest.fixture()
def pair() -> tuple[pd.Series, pd.Series]:
    return random_pair(7)
