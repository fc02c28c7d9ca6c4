"""The memory a strategy host reads the market from: rows appear only when written, whatever was
mapped in ahead."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from oomrl.market.rules import AShareRules
from oomrl.portfolio import hosting
from oomrl.portfolio.hosting import SharedMarket
from oomrl.portfolio.market import MarketFrames
from tests.portfolio.factories import random_panels


@pytest.fixture()
def market() -> MarketFrames:
    return MarketFrames.build(
        random_panels([f"{600000 + i}.SH" for i in range(40)], days=400), AShareRules()
    )


def host_view(shared: SharedMarket) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """What a host maps: the read-only descriptor, as its own mapping."""
    size = shared.size
    memory = mmap.mmap(os.dup(shared.readonly), size, mmap.MAP_SHARED, mmap.PROT_READ)
    capacity, width = len(shared.days), shared.width
    days = np.frombuffer(memory, "<i8", capacity, 0)
    data = {
        f: np.frombuffer(memory, "<f8", capacity * width, 8 * capacity * (1 + i * width)).reshape(
            capacity, width
        )
        for i, f in enumerate(shared.fields)
    }
    return days, data


def test_rows_mapped_in_ahead_stay_unwritten_until_written(market: MarketFrames) -> None:
    shared = SharedMarket(market)
    days, data = host_view(shared)
    shared.write(10)
    shared.prefault(20)  # maps a whole chunk of pages in: none of their rows may become visible
    assert shared.faulted == min(hosting.PREFAULT_CHUNK, len(market.days))
    assert not days[10:].any() and all(not array[10:].any() for array in data.values())
    shared.write(30)
    assert (days[:30] == market.day_ns[:30]).all() and not days[30:].any()
    for name, array in market.panels.arrays.items():
        np.testing.assert_array_equal(data[name][:30], array[:30])
        assert not data[name][30:].any()
    shared.close()


def test_without_the_kernels_prefault_rows_are_written_all_the_same(
    market: MarketFrames, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosting, "MADV_POPULATE_WRITE", 0x7FFF)  # an advice no kernel knows: EINVAL
    # A fresh memory file (a kept one is mapped in already)
    monkeypatch.setattr(hosting, "_POOL", [])
    shared = SharedMarket(market)
    shared.prefault(50)
    assert shared.faulted == -1  # given up for this market, never retried
    shared.prefault(100)
    shared.write(len(market.days))
    days, data = host_view(shared)
    assert (days == market.day_ns).all()
    np.testing.assert_array_equal(data["close"], market.panels.arrays["close"])
    shared.close()


def test_session_days_cross_as_midnight_nanoseconds(market: MarketFrames) -> None:
    assert market.day_ns.dtype.str == "<i8"
    assert (market.day_ns == market.dates.values.astype("datetime64[ns]").astype("<i8")).all()
    assert (market.day_ns % 86_400_000_000_000 == 0).all()


def test_a_kept_memory_file_holds_no_row_of_the_market_before(
    market: MarketFrames, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosting, "_POOL", [])
    first = SharedMarket(market)
    first.write(len(market.days))  # every row, the latest dates included
    first.close()
    again = SharedMarket(market)
    assert again.faulted == len(market.days)  # the same file, its pages in place
    days, data = host_view(again)
    assert not days.any() and all(not array.any() for array in data.values())
    again.write(5)
    assert (days[:5] == market.day_ns[:5]).all() and not days[5:].any()
    again.close()


def test_only_a_file_of_the_exact_size_is_kept_and_a_host_that_may_run_gives_its_file_up(
    market: MarketFrames, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosting, "_POOL", [])
    smaller = MarketFrames.build(
        random_panels([f"{600000 + i}.SH" for i in range(39)], days=400), AShareRules()
    )
    SharedMarket(market).close()
    other = SharedMarket(smaller)
    # Not the larger file: nothing beyond its own rows
    assert other.faulted == 0 and len(hosting._POOL) == 1
    other.close(reuse=False)
    assert [entry[0] for entry in hosting._POOL] == [
        8 * len(market.days) * (1 + len(market.symbols) * len(market.panels.arrays))
    ]
    for _ in range(hosting.POOL_FILES + 1):
        SharedMarket(smaller).close()
    assert len(hosting._POOL) <= hosting.POOL_FILES
