"""Metrics: pure functions over a Trace (or its tables) returning DataFrames. Times in ns."""
