"""Config emitters: runnable reference configurations for findings."""
