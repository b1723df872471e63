"""Load the sanitizer build of the SQLite table scanner in place of
``advisor.trace._sqlscan``: a pytest plugin (``-p sqlscan_swap``, with ``tests/sanitize`` on
PYTHONPATH) that swaps in the module named by SQLSCAN_SO when it is imported, before the
conftest files import the readers (advisor.trace.sqlscan binds the scanner once)."""

from __future__ import annotations

import os
import sys

from kscan_swap import load_extension

NAME = "advisor.trace._sqlscan"


def _swap(path: str) -> None:
    if "advisor.trace.sqlscan" in sys.modules:
        raise RuntimeError("advisor.trace.sqlscan was imported before the scanner was swapped")
    module = load_extension(NAME, path)
    from advisor.trace import sqlscan

    if sqlscan._sqlscan is not module:
        raise RuntimeError("the SQLite reader did not take the swapped scanner")
    print(f"sqlscan_swap: {module.__file__}", file=sys.stderr)


if __name__ != "__main__" and os.environ.get("SQLSCAN_SO"):
    _swap(os.environ["SQLSCAN_SO"])
