"""Prefect @flow definitions that read like the DAG: ingest, rebalance, replay, attribution, repair,
and the daily chain."""
