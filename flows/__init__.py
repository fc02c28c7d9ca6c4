"""Prefect @flow definitions that read like the DAG: ingest, rebalance, replay, attribution, repair, cycle."""
