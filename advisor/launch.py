"""Console entry point: process-wide memory settings first, then the command line.

glibc reads its arena limit when a thread first allocates, so it is set here, before
``advisor.cli`` imports the libraries (pyarrow and the trace readers start threads)."""

from __future__ import annotations

from advisor.memory import share_one_heap


def entry() -> None:
    """``advisor`` on the command line (and ``python -m advisor``)."""
    share_one_heap()
    from advisor.cli import entry as run_cli

    run_cli()
