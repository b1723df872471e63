"""An uncompressed trace's events scanned in place: the file memory-mapped read-only, cut
into chunks between events, several chunks scanned at a time on threads (the compiled
scanner releases the GIL). This module runs the scanner's own pass and nothing else, and
imports neither numpy nor pandas, so that the pass can start while those load (early.py);
mapped.py turns each chunk's raw columns into tables."""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from concurrent.futures import Future
from types import ModuleType
from typing import Any

from advisor.trace.kineto.head import BOUNDARY

Step = Callable[[mmap.mmap, int, int, Any], Any]


def raw_scan(kscan: ModuleType, buf, start: int = 0, stop: int = -1) -> Any:
    """The compiled scanner's result for the events of ``buf[start:stop]`` (_kscan.c: rows,
    columns, raw names, the offset after the array's ``]`` or -1), or None where it declines
    the bytes; the categories and modes are the module's own (the contract's, for a build
    of the reader's contract: scan.scanner_enabled)."""
    return kscan.scan(buf, kscan.SCAN_CATEGORIES, kscan.SCAN_MODES, start, stop, None)


class ChunkScans:
    """The scanner's pass over the events array of ``fh`` (from its ``[`` at ``bracket``),
    in chunks of about ``chunk_bytes`` cut between events. Worker threads take the chunks in
    order: each is scanned, and finished by ``finish``'s step once that is given (until
    then only scanned and kept raw: what ``early`` starts, before the step's modules have
    loaded). With ``background``, ``threads`` workers start when this is made; otherwise
    ``finish`` starts them. ``kscan``: the compiled scanner, or None to scan nothing (every
    chunk is then finished from its bytes)."""

    def __init__(self, fh, bracket: int, threads: int, chunk_bytes: int,
                 kscan: ModuleType | None, background: bool = False) -> None:  # fmt: skip
        self.kscan, self.bracket = kscan, bracket
        self.mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        starts = [bracket]
        while (cut := self.mm.find(BOUNDARY, starts[-1] + chunk_bytes)) >= 0:
            starts.append(cut)
        self.cuts = list(zip(starts, [*starts[1:], -1], strict=True))
        self._done: list[Future] = [Future() for _ in self.cuts]  # each chunk's finished part
        self._lock = threading.Lock()  # (guards what follows)
        self._next = 0  # the next chunk to scan
        self._step: Step | None = None
        self._raw: dict[int, Any] = {}  # chunks scanned before the step was known
        self._unfinished: list[int] = []  # those of them no worker has taken yet
        self._stopped = False
        self._workers: list[threading.Thread] = []
        if background:
            self._add_workers(threads)

    def _add_workers(self, count: int) -> None:
        """Start workers until ``count`` are running (at most one per chunk). Workers that
        have returned do not count: the early pass's worker returns once every chunk is
        scanned, and the finishing steps then need workers of their own."""
        running = sum(worker.is_alive() for worker in self._workers)
        for _ in range(min(count, len(self.cuts)) - running):
            worker = threading.Thread(target=self._work, name="advisor-scan", daemon=True)
            self._workers.append(worker)
            worker.start()

    def _work(self) -> None:
        """Until nothing is left (or stopped): finish a chunk scanned before the step was
        known, else scan the next chunk and finish it (or keep it raw: no step yet)."""
        while True:
            with self._lock:
                if self._stopped:
                    return
                if self._unfinished:
                    i, scanned = self._unfinished.pop(0), True
                    found = self._raw.pop(i)
                elif self._next < len(self.cuts):
                    i, scanned, found = self._next, False, None
                    self._next += 1
                else:
                    return
            a, b = self.cuts[i]
            try:
                if not scanned:
                    found = self._scan(a, b)
                    with self._lock:  # (finish lists the raw chunks under this lock)
                        if self._step is None:
                            self._raw[i] = found
                            continue
                assert self._step is not None
                self._done[i].set_result(self._step(self.mm, a, b, found))
            except BaseException as exc:  # noqa: BLE001 (raised again by finish, in order)
                self._done[i].set_exception(exc)

    def _scan(self, start: int, stop: int) -> Any:
        """The chunk's raw scan; its pages then go back (the finishing step reads few of them
        again: GEMM ops' args, the document's tail, a chunk the scanner declined)."""
        if self.kscan is None:
            return None
        found = raw_scan(self.kscan, self.mm, start, stop)
        release(self.mm, start, stop)
        return found

    def finish(self, step: Step, threads: int) -> list:
        """``step(map, start, stop, raw)`` for each chunk, ``threads`` at a time (the calling
        thread is one of them): first the chunks scanned before, then each right after its
        scan. Returns the parts in order, then closes the map; raises what a scan or a step
        raised, the first in order."""
        try:
            with self._lock:
                self._step = step
                self._unfinished = sorted(self._raw)
            self._add_workers(threads - 1)
            self._work()
            return [done.result() for done in self._done]
        finally:
            self.close()

    def close(self) -> None:
        """Stop: chunks not started are left, the running ones finished, the map closed."""
        with self._lock:
            self._stopped = True
        for worker in self._workers:
            worker.join()
        if not self.mm.closed:
            self.mm.close()


def release(mm: mmap.mmap, start: int, stop: int) -> None:
    """Give the pages of ``mm[start:stop]`` (stop -1: to the end) back to the page cache,
    so that the map never holds the whole file (Linux; elsewhere nothing)."""
    if hasattr(mmap, "MADV_DONTNEED"):
        page = start - start % mmap.PAGESIZE
        mm.madvise(mmap.MADV_DONTNEED, page, (stop if stop >= 0 else len(mm)) - page)
