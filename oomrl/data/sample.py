"""The offline default: make sure OOMRL_HOME/data holds the bundled real-data sample."""

from __future__ import annotations

from oomrl.data.ingest import ingest
from oomrl.data.sample_clock import clocked_end
from oomrl.data.sources.sample import SampleSource
from oomrl.data.store import MarketStore
from oomrl.settings import OomrlSettings


def ensure_sample(settings: OomrlSettings, wait: float | None = None) -> MarketStore:
    """The market store of `settings`. When it is empty, ingest the bundled sample into it first.

    The whole sample, or up to OOMRL_SAMPLE_CLOCK's session (oomrl/data/sample_clock.py). Several
    processes may start on an empty store at once. Each takes the writer lock (waiting up to `wait`
    s) and checks again. So the sample is ingested once, and the others find it there.
    """
    store = MarketStore(settings.store.data_dir)
    if store.is_empty():
        with store.transaction(wait) as tx:
            if tx.is_empty():
                source = SampleSource()  # with the sample clock on, up to its session only
                ingest(
                    source,
                    "all",
                    None,
                    clocked_end(source, None, settings.store.sample_clock, tx),
                    tx,
                )
    return store
