"""Prefect @task wrappers: thin; retries, caching, artifacts and events live here."""
