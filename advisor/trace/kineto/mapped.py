"""The memory-mapped read: an uncompressed trace read in place by the compiled scanner, in
chunks cut between events, several chunks at a time (it releases the GIL)."""

from __future__ import annotations

import mmap
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from advisor.trace.kineto.decode import Chunk, decode_events
from advisor.trace.kineto.head import BOUNDARY, Head
from advisor.trace.kineto.scan import scan_events
from advisor.trace.kineto.schema import DOCUMENT, EVENTS, Document
from advisor.trace.kineto.stream import Read
from advisor.trace.kineto.tables import Collector


def read_mapped(fh, head: Head, threads: int, chunk_bytes: int) -> Read | None:
    """Read a laid-out uncompressed trace through a read-only memory map of ``fh``: chunks of
    about ``chunk_bytes``, ``threads`` at a time; each chunk's pages are given back when it
    is done, so the map never holds the whole file. None when the events array closes before
    the last cut (then the document is streamed)."""
    keys = head.document()
    head.release()
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        starts = [head.bracket]
        while (cut := mm.find(BOUNDARY, starts[-1] + chunk_bytes)) >= 0:
            starts.append(cut)
        stops = [*starts[1:], -1]
        scan = partial(_scan_chunk, mm)
        if len(starts) == 1 or threads <= 1:
            parts = list(map(scan, starts, stops))
        else:
            with ThreadPoolExecutor(min(threads, len(starts))) as pool:
                parts = list(pool.map(scan, starts, stops))
    tail = parts[-1][1]
    if any(t is not None for _, t in parts[:-1]) or tail is None:
        return None  # the events array closed before the last cut: streamed instead
    collect = Collector()
    for chunk, _ in parts:
        collect.append(chunk)
    return [keys, tail], collect.tables(), collect.bad


def _scan_chunk(mm: mmap.mmap, start: int, stop: int) -> tuple[Chunk, Document | None]:
    """The columns of the events of ``mm[start:stop]`` (``start``: the array's ``[`` or a
    cut's comma; ``stop``: the next cut, -1: the array's end) and, for the last chunk, the
    rest of the document; decoded by msgspec where the scanner declines the bytes."""
    found = scan_events(mm, start, stop)
    if found is not None:
        chunk, closed = found
        tail = DOCUMENT.decode(b'{"traceEvents": []' + mm[closed:]) if closed >= 0 else None
    elif stop >= 0:
        chunk, tail = decode_events(EVENTS.decode(b"[" + mm[start + 1 : stop] + b"]")), None
    else:
        tail = DOCUMENT.decode(b'{"traceEvents": [' + mm[start + 1 :])
        chunk = decode_events(tail.traceEvents or [])
        tail.traceEvents = []
    if hasattr(mmap, "MADV_DONTNEED"):  # (Linux) the pages read go back to the page cache
        page = start - start % mmap.PAGESIZE
        mm.madvise(mmap.MADV_DONTNEED, page, (stop if stop >= 0 else len(mm)) - page)
    return chunk, tail
