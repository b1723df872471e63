"""Console entry point: process-wide settings first, then the command line.

glibc reads its arena limit when a thread first allocates, so it is set here, before
``advisor.cli`` imports the libraries (pyarrow and the trace readers start threads). So is
OpenBLAS's thread count: numpy starts a pool of BLAS threads when imported, advisor runs no
BLAS, and those threads spin (perf, 100K-kernel Kineto trace on this 2-core VM: 5% of the
CPU samples in OpenBLAS's thread server beside the reader's threads; none with one BLAS
thread). A value the user set is kept."""

from __future__ import annotations

import gc
import os
import sys

from advisor.memory import share_one_heap
from advisor.trace import early


def entry() -> None:
    """``advisor`` on the command line (and ``python -m advisor``). The libraries are
    imported with Python's garbage collector off and their objects then frozen (left out of
    every later collection: modules live until the process exits), so that neither the
    imports nor each full collection of the command walk them again: on a 100K-kernel Kineto
    trace all collections took 0.10-0.13 s of the 1.2 s run before, 0.01 s after (with
    memory.paused_gc around the pipeline)."""
    gc.disable()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    share_one_heap()
    early.start(sys.argv[1:])  # (a large trace's scan runs while the libraries load)
    python_strings()
    from advisor.cli import entry as run_cli

    gc.freeze()
    gc.enable()
    run_cli()


def python_strings() -> None:
    """pandas 3 keeps inferred text in Arrow-backed ``str`` arrays; pandas 2 (also
    supported) in Python objects. advisor's text columns are categoricals or small tables
    (rules scopes, renderers' rows), where every Arrow string operation pays a conversion:
    with object strings the whole command takes ~0.15 s less on a 2,640-kernel trace and
    ~0.2 s less on a 100K-kernel one (docs/scaling.md, "Issue 33, fourth pass"), with the
    same output. Only the console
    entry sets this: a library user's process keeps its own pandas options. A no-op where
    the option is gone (pandas 4)."""
    import contextlib
    import warnings

    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (pandas 3.1 marks the option deprecated)
        with contextlib.suppress(KeyError):  # (pandas.errors.OptionError is one)
            pd.set_option("future.infer_string", False)
