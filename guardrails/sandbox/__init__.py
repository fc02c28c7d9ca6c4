"""The host side of locked runs: locks, strategy hosts, test runs, tree anchors, coverage data.

The bubblewrap backend (`bwrap`) and the project's pytest plugin (`hostplugin`) load on demand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from guardrails.sandbox.anchoring import (
        changed_paths,
        hash_violations,
        lock_manifest,
        manifest_digest,
        scratch_copy,
        tree_manifest,
    )
    from guardrails.sandbox.backends import select_lock
    from guardrails.sandbox.coverage_data import CoverageReader
    from guardrails.sandbox.locks import LOCKS, HashOnlyLock, RoLock, make_readable
    from guardrails.sandbox.runner import GateDirs, SuiteRequest, SuiteResult, run_suite
    from guardrails.sandbox.strategyhost import (
        HOST_POLL_S,
        HostProcess,
        HostSpec,
        relay,
        start_host,
    )
    from guardrails.sandbox.tempdirs import OWNER_NOTE

__all__ = [
    "CoverageReader",
    "GateDirs",
    "HOST_POLL_S",
    "HashOnlyLock",
    "HostProcess",
    "HostSpec",
    "LOCKS",
    "OWNER_NOTE",
    "RoLock",
    "SuiteRequest",
    "SuiteResult",
    "changed_paths",
    "hash_violations",
    "lock_manifest",
    "make_readable",
    "manifest_digest",
    "relay",
    "run_suite",
    "scratch_copy",
    "select_lock",
    "start_host",
    "tree_manifest",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a name missing there is an error, not Any
    __getattr__ = front_door(__name__, __file__)
