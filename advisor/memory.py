"""Process memory policy: freed heap given back between stages, huge pages by size.

Bulk reads allocate in reader threads' malloc arenas; once converted, that memory is
free but glibc keeps it (hundreds of MB on a million-kernel trace), so the next stage
would grow the process further instead of reusing it. ``malloc_trim(0)`` returns it.
Elsewhere (macOS, musl) this is a no-op.

numpy asks the kernel for transparent huge pages on every array of 4 MB or more. That
pays off only when large arrays come and go many times: glibc serves arrays above 32 MB
(int64 columns of more than 4M rows) from fresh mappings on each allocation, and faulting
those in 2 MB at a time instead of 4 kB is several times cheaper. Below that size arrays
are reused from the heap, and huge pages only add first-touch cost (measurements:
docs/scaling.md, "Memory policy"). From that size on, every array also comes from the
heap, which keeps what is freed (keep_large_arrays_in_heap): on this project's VM memory a
process touches for the first time costs 3-6 s per GB, and a 10M-kernel trace otherwise
faulted in ten times its peak. These are process policies: only the console entry
sets them (launch.py, and the CLI's ``memory_advice`` passed to the pipeline).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
from collections.abc import Iterator
from functools import cache


@cache
def _libc():
    """The C library's functions as the process already has them loaded (``dlopen(NULL)``:
    no search for the library file, which ``ctypes.util.find_library`` does by running
    ``ldconfig``); None where it has no glibc heap functions."""
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, as it was after it (a scoped
    setting, not a process policy: the Kineto reader and the pipeline use it). Reading and
    analysing a trace makes millions of short-lived objects and few reference cycles; each
    full collection walks every live object (on a 100K-kernel Kineto trace two of them took
    50-90 ms, all collections 0.10-0.13 s of a 1.2 s run). The cycles made meanwhile are
    collected by the first collection after the block."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def release_freed_memory() -> None:
    """Return free heap pages to the OS (glibc only); not once the process keeps its freed
    heap for reuse (keep_large_arrays_in_heap)."""
    libc = _libc()
    if libc is not None and not _heap_kept:
        libc.malloc_trim(0)


_M_ARENA_MAX = -8  # glibc mallopt parameter


def share_one_heap() -> None:
    """Make every thread allocate from glibc's main arena (glibc only). Reader threads
    stream Arrow batches; in arenas of their own the freed batches would stay there, out
    of reach of the analysis that follows in the main thread (docs/scaling.md). Call
    before any thread starts (advisor.launch does, first thing)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, 1)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters
MMAP_THRESHOLD = 32 << 20  # glibc's own dynamic threshold reaches this (64-bit) at most


def keep_freed_heap() -> None:
    """Undo a small fixed trim threshold (Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 for
    its workers): with it, glibc stops raising its mmap threshold, so every array above
    128 kB is a fresh mapping that is faulted in again (docs/scaling.md: on a VM that is
    what costs). Sets the thresholds glibc's defaults settle at for large arrays: mmap
    above 32 MB, trim above 64 MB (glibc only)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD)


HUGE_PAGE_ROWS = 4_000_000  # int64 columns this long exceed glibc's 32 MB mmap threshold cap


def advise_huge_pages(rows: int) -> None:
    """Let numpy advise transparent huge pages for its large arrays when the tables about
    to be processed have at least HUGE_PAGE_ROWS rows; not below (see module docstring).
    A no-op where numpy lacks the switch."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # (numpy < 2: core)
        try:  # (a private switch, absent from numpy's type stubs: looked up by name)
            switch = getattr(importlib.import_module(module), "_set_madvise_hugepage", None)
        except ImportError:
            continue
        if switch is not None:
            switch(rows >= HUGE_PAGE_ROWS)
            return


def advise_for_rows(rows: int) -> None:
    """The console's policy for tables of ``rows`` rows: huge pages from HUGE_PAGE_ROWS
    (advise_huge_pages), and from there on large arrays kept in the heap
    (keep_large_arrays_in_heap; once set, for the rest of the process)."""
    advise_huge_pages(rows)
    if rows >= HUGE_PAGE_ROWS:
        keep_large_arrays_in_heap()


_M_MMAP_MAX = -4  # glibc mallopt parameter
# glibc: a trim threshold of -1 turns trimming off (mallopt takes a C int: ctypes masks a
# larger value, and 2**62 became 0, trimming at every free)
_NEVER = -1
_heap_kept = False  # keep_large_arrays_in_heap was called


def keep_large_arrays_in_heap() -> None:
    """Serve every allocation from the heap and never give its free top back (glibc only).
    glibc maps each array above 32 MB afresh and unmaps it when freed, so a table of
    millions of rows faults its temporaries in again and again: at 10M kernels the
    analysis faulted in ~50 GB for a 5 GB peak (docs/scaling.md). From the heap, freed
    arrays are reused in place. The process keeps its peak until it exits: for the
    console's one command, not for a library or a worker."""
    global _heap_kept
    libc = _libc()
    if libc is not None:
        _heap_kept = True
        libc.mallopt(_M_MMAP_MAX, 0)
        libc.mallopt(_M_TRIM_THRESHOLD, _NEVER)
