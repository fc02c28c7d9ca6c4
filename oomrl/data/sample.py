"""The offline default: make sure OOMRL_HOME/data holds the bundled real-data sample."""

from __future__ import annotations

from oomrl.config import Settings
from oomrl.data.ingest import ingest
from oomrl.data.sources.sample import SampleSource
from oomrl.data.store import MarketStore


def ensure_sample(settings: Settings) -> MarketStore:
    """The market store of `settings`; when it is empty, ingest the whole bundled sample into it first."""
    store = MarketStore(settings.data_dir)
    if store.is_empty():
        ingest(SampleSource(), "all", None, None, store)
    return store
