"""The Prefect adapter: launchers, the review pause and the local stack drive Prefect here.

oomrl/ stays importable without Prefect (docs/architecture.md §2). This package is where the domain
meets Prefect's client. Nothing below it imports it back.
"""
