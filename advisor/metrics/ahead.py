"""Block after block, the next blocks computed ahead on other threads.

The analysis works through its largest tables a block of rows at a time, so that every
temporary is a block long. Most of a block's work is numpy on whole arrays, which lets go
of the interpreter while it runs: a second thread can compute the next block while the
caller folds the last one into its results. ``ahead`` runs a pure function of a block on
up to ``threads`` threads and hands the results back in the blocks' order, with at most
``threads`` blocks started ahead of the one the caller holds (their memory is bounded),
so that the caller's result does not depend on the thread count.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

Block = TypeVar("Block")
Result = TypeVar("Result")

# threads the analysis uses by default: measured on 2 cores (docs/scaling.md, nineteenth
# pass); more threads mostly wait for the interpreter and hold more blocks at once
ANALYSIS_THREADS = 2


def analysis_threads(cores: int | None = None) -> int:
    """Threads an analysis may use: ``cores`` where given (a worker's share of the
    machine), else ANALYSIS_THREADS or the cores this process may run on, whichever is
    fewer (at least 1)."""
    if cores is not None:
        return max(1, cores)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # (macOS, Windows)
        usable = os.cpu_count() or 1
    return max(1, min(ANALYSIS_THREADS, usable))


def ahead(work: Callable[[Block], Result], blocks: Iterable[Block], threads: int
          ) -> Iterator[Result]:  # fmt: skip
    """``work(block)`` for each block, in the blocks' order; with ``threads`` >= 2, up to
    that many computed at once on their own threads while the caller takes the earlier
    ones (``work`` must be safe to run on several threads at once). An exception in
    ``work`` is raised here, at its block; blocks not started by then are dropped."""
    if threads < 2:
        yield from map(work, blocks)
        return
    pending: deque[Future[Result]] = deque()
    todo = iter(blocks)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="advisor-ahead")
    try:
        for block in todo:
            pending.append(pool.submit(work, block))
            if len(pending) == threads:
                break
        while pending:
            result = pending.popleft().result()
            for block in todo:  # (one more started for the one taken)
                pending.append(pool.submit(work, block))
                break
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
