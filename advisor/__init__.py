"""advisor: measure scheduling idle time in GPU traces and recommend strategies."""

__version__ = "0.1.0"
