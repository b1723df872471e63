"""Work computed ahead on other threads: block after block, or a stage beside another.

The analysis works through its largest tables a block of rows at a time, so that every
temporary is a block long. Most of a block's work is numpy on whole arrays, which lets go
of the interpreter while it runs: a second thread can compute the next block while the
caller folds the last one into its results. ``ahead`` runs a pure function of a block on
up to ``threads`` threads and hands the results back in the blocks' order, with at most
``threads`` blocks started ahead of the one the caller holds (callers shorten their
blocks so that these together hold about what one block held before), so that the
caller's result does not depend on the thread count. ``beside`` starts a stage on a
thread of its own while the caller goes on with another that does not need it.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, islice
from typing import TypeVar

Block = TypeVar("Block")
Result = TypeVar("Result")
Value = TypeVar("Value")

# threads the analysis uses by default (docs/scaling.md, nineteenth pass: on 2 cores two
# threads computing ahead beat one; more were not measurable there, and each holds a block)
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
    """``work(block)`` for each block, in the blocks' order; with ``threads`` >= 2, that
    many blocks computed at once on threads of their own, ahead of the one the caller
    holds (``work`` must be safe to run on several threads at once); with one, or where
    there is a single block, each block on the caller's thread as it is taken (no threads
    started for nothing). An exception in ``work`` is raised here, at its block; blocks not
    started by then are dropped."""
    if threads < 2:
        yield from map(work, blocks)
        return
    todo = iter(blocks)
    head = list(islice(todo, 2))
    if len(head) < 2:
        yield from map(work, head)
        return
    todo = chain(head, todo)
    pending: deque[Future[Result]] = deque()
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


def once(cache: dict, key, make: Callable[[], Value], lock) -> Value:
    """``cache[key]``, made by ``make()`` the first time, by one thread holding ``lock``
    (threads asking meanwhile wait for it; with an RLock a build may need another entry);
    an entry already made is read without the lock."""
    try:
        return cache[key]
    except KeyError:
        with lock:
            if key not in cache:
                cache[key] = make()
            return cache[key]


def beside(work: Callable[[], Result], threads: int) -> Future[Result]:
    """``work()`` started on a thread of its own where ``threads`` >= 2, else run now; its
    Future's ``result()`` waits for it and raises what it raised. ``work`` may read what
    the caller reads meanwhile, never what the caller changes."""
    done: Future[Result] = Future()

    def run() -> None:
        done.set_running_or_notify_cancel()
        try:
            done.set_result(work())
        except BaseException as exc:  # (raised by result(), on the caller's thread)
            done.set_exception(exc)

    if threads < 2:
        run()
    else:
        threading.Thread(target=run, name="advisor-beside", daemon=True).start()
    return done
