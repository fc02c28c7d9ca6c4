"""Market data: sources, validation and the parquet store."""
