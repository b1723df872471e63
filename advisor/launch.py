"""Console entry point: process-wide settings first, then the command line.

glibc reads its arena limit when a thread first allocates, so it is set here, before
``advisor.cli`` imports the libraries (pyarrow and the trace readers start threads). So is
OpenBLAS's thread count: numpy starts a pool of BLAS threads when imported, advisor runs no
BLAS, and those threads spin (perf, 100K-kernel Kineto trace on this 2-core VM: 5% of the
CPU samples in OpenBLAS's thread server beside the reader's threads; none with one BLAS
thread). A value the user set is kept."""

from __future__ import annotations

import os

from advisor.memory import share_one_heap


def entry() -> None:
    """``advisor`` on the command line (and ``python -m advisor``)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    share_one_heap()
    from advisor.cli import entry as run_cli

    run_cli()
