"""Readers: profiler outputs -> one format-free Trace."""
