"""The sample clock: an empty store gets the sample up to the clock's session, each ingest of the
sample one session more (holidays skipped), never past the sample's end; anything else is
untouched."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from oomrl.data.sample_clock import clock_end, clocked_end, next_session
from oomrl.data.store import MarketStore
from tests.data.conftest import make_bars

SAMPLE_LAST = date(2026, 2, 27)


def _store(tmp_path: Path, start: str | None, days: int = 3) -> MarketStore:
    store = MarketStore(tmp_path / "data")
    if start is not None:
        store.write_bars(make_bars(start=start, days=days))
    return store


@pytest.mark.slow  # writes four small stores
def test_the_clock_moves_one_session_per_ingest_across_weekends_and_holidays(
    tmp_path: Path,
) -> None:
    clock = date(2024, 7, 1)
    # An empty store: the start
    assert clock_end(clock, _store(tmp_path / "empty", None), SAMPLE_LAST) == clock
    assert clock_end(clock, _store(tmp_path / "a", "2024-07-01", 1), SAMPLE_LAST) == date(
        2024, 7, 2
    )
    # Fri -> Mon
    assert clock_end(clock, _store(tmp_path / "b", "2024-07-03", 3), SAMPLE_LAST) == date(
        2024, 7, 8
    )
    assert next_session(date(2024, 9, 30)) == date(2024, 10, 8)  # the National Day holiday
    # The end holds
    assert clock_end(clock, _store(tmp_path / "c", "2026-02-25", 3), SAMPLE_LAST) == SAMPLE_LAST
    assert clock_end(date(2025, 1, 2), _store(tmp_path / "d", "2024-07-01"), SAMPLE_LAST) == date(
        2025, 1, 2
    )
    assert clock_end(None, _store(tmp_path / "e", "2024-07-01"), SAMPLE_LAST) is None  # off


@pytest.mark.slow  # reads the bundled sample's coverage
def test_only_an_ingest_of_the_sample_without_an_end_is_clocked(tmp_path: Path) -> None:
    from oomrl.data.sources.sample import SampleSource
    from oomrl.data.sources.synthetic import SyntheticSource

    store, clock, sample = _store(tmp_path, "2024-07-01", 1), date(2024, 7, 1), SampleSource()
    assert clocked_end(sample, None, clock, store) == date(2024, 7, 2)
    # An explicit end is kept
    assert clocked_end(sample, "2024-12-31", clock, store) == "2024-12-31"
    # Only the sample is clocked
    assert clocked_end(SyntheticSource(symbols=3), None, clock, store) is None
    assert clocked_end(sample, None, None, store) is None  # the clock off: as always


@pytest.mark.slow  # ingests the bundled sample twice
def test_a_fresh_home_with_the_clock_holds_the_sample_up_to_it_and_each_ingest_adds_a_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomrl.data.sample import ensure_sample
    from oomrl.ops.cli import app
    from oomrl.settings import get_settings

    monkeypatch.setenv("OOMRL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OOMRL_SAMPLE_CLOCK", "2024-09-30")
    store = ensure_sample(get_settings())
    assert store.bar_summary()["last_date"] == pd.Timestamp("2024-09-30")
    # No CSI 300 level from the future
    assert store.read_index().index.max() == pd.Timestamp("2024-09-30")
    assert len(store.read_membership()) > 300  # point-in-time snapshots: whole
    result = CliRunner().invoke(app, ["ingest"])  # the chain's ingest, from the command line
    assert result.exit_code == 0, result.output
    assert store.bar_summary()["last_date"] == pd.Timestamp("2024-10-08")  # the next session
    assert store.read_index().index.max() == pd.Timestamp("2024-10-08")
