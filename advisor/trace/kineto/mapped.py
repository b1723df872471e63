"""The memory-mapped read: an uncompressed trace read in place by the compiled scanner, in
chunks cut between events, several chunks at a time (chunks.py), each chunk's raw columns
then made into the tables' columns."""

from __future__ import annotations

import mmap

from advisor.trace.kineto.chunks import ChunkScans, release
from advisor.trace.kineto.decode import Chunk, decode_events
from advisor.trace.kineto.head import Head
from advisor.trace.kineto.scan import _kscan, chunk_of
from advisor.trace.kineto.schema import DOCUMENT, EVENTS, Document
from advisor.trace.kineto.stream import Read
from advisor.trace.kineto.tables import Collector


def read_mapped(fh, head: Head, threads: int, chunk_bytes: int,
                scans: ChunkScans | None = None) -> Read | None:  # fmt: skip
    """Read a laid-out uncompressed trace through a read-only memory map of ``fh``: chunks of
    about ``chunk_bytes``, ``threads`` at a time; each chunk's pages are given back when it
    is done, so the map never holds the whole file. ``scans``: those of this file's events
    already started (early.py), else started here. None when the events array closes
    before the last cut (then the document is streamed)."""
    keys = head.document()
    head.release()
    scans = scans or ChunkScans(fh, head.bracket, threads, chunk_bytes, _kscan)
    parts = scans.finish(_chunk, threads)
    tail = parts[-1][1]
    if any(t is not None for _, t in parts[:-1]) or tail is None:
        return None  # the events array closed before the last cut: streamed instead
    collect = Collector()
    for chunk, _ in parts:
        collect.append(chunk)
    return [keys, tail], collect.tables(), collect.bad


def _chunk(mm: mmap.mmap, start: int, stop: int, raw) -> tuple[Chunk, Document | None]:
    """The columns of the events of ``mm[start:stop]`` (``start``: the array's ``[`` or a
    cut's comma; ``stop``: the next cut, -1: the array's end) from the scanner's ``raw``
    result and, for the last chunk, the rest of the document; decoded by msgspec where the
    scanner declined the bytes (``raw`` None) or its names or GEMM args do not decode."""
    found = chunk_of(mm, raw) if raw is not None else None
    if found is not None:
        chunk, closed = found
        tail = DOCUMENT.decode(b'{"traceEvents": []' + mm[closed:]) if closed >= 0 else None
    elif stop >= 0:
        chunk, tail = decode_events(EVENTS.decode(b"[" + mm[start + 1 : stop] + b"]")), None
    else:
        tail = DOCUMENT.decode(b'{"traceEvents": [' + mm[start + 1 :])
        chunk = decode_events(tail.traceEvents or [])
        tail.traceEvents = []
    release(mm, start, stop)
    return chunk, tail
