"""Style factors: quintile spreads on lagged characteristics, and the exact return decomposition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from oomrl.errors import MetricsInputError
from oomrl.metrics import factors


def test_high_minus_low_uses_yesterdays_ranks_and_equal_weights() -> None:
    dates = pd.bdate_range("2025-01-06", periods=2)
    symbols = [f"S{i:02d}" for i in range(10)]
    trait = pd.DataFrame(
        [list(range(10)), list(range(10))[::-1]], index=dates, columns=symbols, dtype=float
    )
    returns = pd.DataFrame([[0.0] * 10, [i / 100 for i in range(10)]], index=dates, columns=symbols)
    spread = factors.high_minus_low(trait, returns)
    # day 2 ranks on day 1's trait (S08, S09 high; S00, S01 low), not day 2's reversed one
    assert spread.iloc[1] == pytest.approx((0.08 + 0.09) / 2 - (0.00 + 0.01) / 2)
    assert np.isnan(spread.iloc[0])  # nothing known before the first day


def test_universe_and_minimum_breadth() -> None:
    dates = pd.bdate_range("2025-01-06", periods=2)
    symbols = [f"S{i:02d}" for i in range(12)]
    trait = pd.DataFrame([list(range(12))] * 2, index=dates, columns=symbols, dtype=float)
    returns = pd.DataFrame([[0.0] * 12, [i / 100 for i in range(12)]], index=dates, columns=symbols)
    members = pd.DataFrame(True, index=dates, columns=symbols)
    members[["S10", "S11"]] = False  # the top two are not in the index that day
    assert factors.high_minus_low(trait, returns, members).iloc[1] == pytest.approx(0.085 - 0.005)
    members[["S00", "S01", "S02"]] = False  # 7 stocks left: too few for a spread
    assert np.isnan(factors.high_minus_low(trait, returns, members).iloc[1])
    with pytest.raises(MetricsInputError, match="quantile"):
        factors.high_minus_low(trait, returns, quantile=0.7)


def _panel(seed: int, days: int = 160, stocks: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2024-07-01", periods=days)
    symbols = [f"{600000 + i}.SH" for i in range(stocks)]
    rets = pd.DataFrame(rng.normal(0.0003, 0.02, (days, stocks)), index=dates, columns=symbols)
    close = 10 * (1 + rets).cumprod()
    volume = pd.DataFrame(rng.lognormal(14, 1, (days, stocks)), index=dates, columns=symbols)
    return close, volume


def test_characteristics_by_hand() -> None:
    close, volume = _panel(1)
    traits = factors.characteristics(close, factors.traded_value(close, volume))
    day, sym = close.index[30], close.columns[3]
    assert traits["momentum"].loc[day, sym] == pytest.approx(
        close.loc[day, sym] / close[sym].iloc[10] - 1
    )
    window = close[sym].pct_change().iloc[11:31]
    assert traits["volatility"].loc[day, sym] == pytest.approx(window.std(ddof=1))
    assert traits["liquidity"].loc[day, sym] == pytest.approx(
        np.log(close.loc[day, sym] * volume.loc[day, sym])
    )
    amount = close * volume * 1.1
    amount.loc[day] = np.nan  # no reported amount that day: close × volume stands in
    mixed = factors.traded_value(close, volume, amount)
    assert mixed.loc[day, sym] == pytest.approx(close.loc[day, sym] * volume.loc[day, sym])
    assert mixed.iloc[0, 0] == pytest.approx(1.1 * close.iloc[0, 0] * volume.iloc[0, 0])


def test_style_attribution_recovers_exposures_and_splits_the_return_exactly() -> None:
    close, volume = _panel(2)
    styles = factors.style_factor_returns(close, factors.traded_value(close, volume))
    assert list(styles.columns) == list(factors.FACTOR_NAMES)
    assert styles.iloc[:21].isna().any(axis=1).all() and styles.iloc[22:].notna().all().all()
    rng = np.random.default_rng(3)
    bench = close.pct_change().mean(axis=1).fillna(0.0).rename("benchmark")
    port = (
        0.0004
        + 0.9 * bench
        + 0.5 * styles["momentum"].fillna(0)
        + rng.normal(0, 0.0003, len(bench))
    ).rename("returns")
    result = factors.style_attribution(port, bench, styles, rf=0.02)
    params = result.regression.params
    assert params["market"] == pytest.approx(0.9, abs=0.02)
    assert params["momentum"] == pytest.approx(0.5, abs=0.02)
    d = result.decomposition
    total = d["risk_free"] + d["beta_return"] + d["style_return"] + d["alpha"]
    assert total == pytest.approx(d["annualized_return"], abs=1e-12)
    assert d["style_return"] == pytest.approx(sum(d[f"style_{n}"] for n in factors.FACTOR_NAMES))
    table = result.table()
    assert list(table.index) == ["alpha", "market", *factors.FACTOR_NAMES]
    assert table.loc["alpha", "annual_contribution"] == pytest.approx(d["alpha"])
    assert result.tracking_error > 0 and result.idiosyncratic_volatility > 0


def test_style_attribution_needs_factor_coverage() -> None:
    close, volume = _panel(4, days=30)
    styles = factors.style_factor_returns(close, factors.traded_value(close, volume))
    bench = close.pct_change().mean(axis=1).fillna(0.0)
    with pytest.raises(MetricsInputError, match="have all factor returns"):
        factors.style_attribution(bench * 1.1 + 0.0001, bench, styles)
    with pytest.raises(MetricsInputError, match="panel is empty"):
        factors.style_factor_returns(close.iloc[:0], volume.iloc[:0])
