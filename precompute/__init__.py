"""Heavy passes that write the DuckDB caches the app reads (``python -m precompute --help``)."""
