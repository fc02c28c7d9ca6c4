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


@pytest.fixture(scope="session")
def traded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A real account traded by the paper broker on the bundled sample (see traded_account)."""
    from tests.metrics.traded_account import build_traded_account

    return build_traded_account(tmp_path_factory.mktemp("traded") / "home")


@pytest.fixture(scope="session")
def traded_report(traded, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The account's report, as `oomrl report --account` writes it."""
    from oomrl.metrics.attribution import account_report
    from oomrl.repair.versions import StrategyVersions
    from tests.metrics.traded_account import ACCOUNT

    # As report_dir names it
    folder = tmp_path_factory.mktemp("reports") / "report-quant-20250530T150000000000Z"
    return account_report(
        traded.ledger,
        traded.store,
        ACCOUNT,
        folder,
        workspace=StrategyVersions(traded.settings.store.workspace_dir),
        runs_dir=traded.settings.store.runs_dir,
    )
