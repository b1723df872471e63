"""The streamed reads: a document (gzip, or uncompressed without the compiled scanner) fed a
chunk of events at a time to the collector, and a large uncompressed one read in spans by
several processes.

Kineto starts every event on a line of its own, two spaces in: the chunks are cut at
``,\\n  {``, which JSON can only hold between tokens (a string never holds a raw newline).
One buffer is reused: the cut comma becomes the chunk's closing ``]`` and the next chunk's
opening ``[``, so no chunk is copied to be decoded. A document written otherwise (minified,
another indent) is decoded whole."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from advisor.trace.kineto.head import BOUNDARY, CHUNK_BYTES, Head
from advisor.trace.kineto.schema import DOCUMENT, Document
from advisor.trace.kineto.tables import Collector, Tables, concat

# a read's result: the document's parts besides the events (head and tail), the tables of
# its events, and the values of the wrong type counted per (table, field)
Read = tuple[list[Document], Tables, Counter]


class ReadAhead:
    """A file's next blocks read by a thread while the current one is decoded (for a gzip
    trace the inflating, which releases the GIL, runs beside the scanning); at most
    ``ahead`` blocks wait, so memory stays bounded."""

    def __init__(self, fh, block: int = CHUNK_BYTES, ahead: int = 2) -> None:
        self._blocks: queue.Queue = queue.Queue(maxsize=ahead)
        self._pending = b""
        self._eof = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(fh, block), daemon=True)

    def __enter__(self) -> ReadAhead:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        while self._thread.is_alive():  # (unblock a producer waiting on a full queue)
            with contextlib.suppress(queue.Empty):
                self._blocks.get(timeout=0.05)
        self._thread.join()

    def _fill(self, fh, block: int) -> None:
        try:
            while not self._stop.is_set():
                data = fh.read(block)
                self._blocks.put(data)
                if not data:
                    return
        except BaseException as exc:  # (raised again in the reader's thread)
            self._blocks.put(exc)

    def _next(self) -> bytes:
        item = self._blocks.get()
        if isinstance(item, BaseException):
            raise item
        self._eof = not item
        return item

    def read(self, n: int = -1) -> bytes:
        if not self._pending and not self._eof and n >= 0:
            block = self._next()
            if len(block) <= n:
                return block
            self._pending = block
        parts, have = [self._pending], len(self._pending)
        while (n < 0 or have < n) and not self._eof:
            block = self._next()
            parts.append(block)
            have += len(block)
        data = b"".join(parts)
        if n < 0:
            self._pending = b""
            return data
        self._pending = data[n:]
        return data[:n]


def stream(fh, head: Head) -> Read:
    """The events of the document whose ``head`` was read from ``fh``, a chunk at a time
    (``fh`` is at the end of the head's bytes); a document not laid out as Kineto writes it
    is decoded whole."""
    collect = Collector()
    if not head.laid_out:
        whole = DOCUMENT.decode(head.first + fh.read())
        collect.add(whole.traceEvents or [])
        docs = [whole]
    else:
        keys = head.document()
        tail = _feed(fh, head.events(), collect, None)
        docs = [keys] if tail is None else [keys, tail]
    return docs, collect.tables(), collect.bad


def _feed(fh, buf: bytearray, collect: Collector, remaining: int | None) -> Document | None:
    """Decode events chunk by chunk from ``buf`` (starting with ``[``) and the next bytes of
    ``fh``: at most ``remaining`` more bytes, whose end is a cut between two events (then
    None is returned), or, with ``remaining=None``, up to the end of the document (then its
    tail, decoded with the last events, is returned)."""
    eof = False
    while True:
        cut = buf.rfind(BOUNDARY)
        if (cut <= 0 or len(buf) < CHUNK_BYTES) and not eof:
            n = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
            more = fh.read(n) if n > 0 else b""
            if remaining is not None:
                remaining -= len(more)
            if more:
                buf += more
            else:
                eof = True
            continue
        if cut <= 0:
            if remaining is None:  # the last events and the rest of the document
                tail = DOCUMENT.decode(b'{"traceEvents": ' + bytes(buf))
                collect.add(tail.traceEvents or [])
                return tail
            if len(buf) > 1:  # a span's last events
                buf += b"]"
                collect.add_json(buf)
            return None
        buf[cut] = ord("]")
        with memoryview(buf) as view:
            collect.add_json(view[: cut + 1])
        del buf[:cut]  # the rest starts at the cut: its comma becomes the next '['
        buf[0] = ord("[")


def read_spans(p: Path, fh, head: Head, size: int, processes: int, span_bytes: int) -> Read:
    """Read a laid-out uncompressed trace in spans cut between events, one process per span
    of at least ``span_bytes`` (events are decoded where they are read; only the tables
    travel back)."""
    keys = head.document()
    head.release()
    workers = max(1, min(processes, size // span_bytes))
    starts = [head.bracket]
    for i in range(1, workers):
        cut = _next_cut(fh, max(size * i // workers, starts[-1] + 1))
        if cut is None:
            break
        starts.append(cut)
    stops = [*starts[1:], None]
    if len(starts) == 1:
        parts = [read_span(str(p), starts[0], None)]
    else:
        with ProcessPoolExecutor(max_workers=len(starts)) as pool:
            parts = list(pool.map(read_span, [str(p)] * len(starts), starts, stops))
    tables = concat([t for t, _, _ in parts])
    tail = parts[-1][1]
    bad = sum((b for _, _, b in parts), Counter())
    return [keys, tail] if tail is not None else [keys], tables, bad


def _next_cut(fh, offset: int) -> int | None:
    """File offset of the first ``,\\n  {`` cut between events at or after ``offset``."""
    fh.seek(offset)
    tail = b""
    while True:
        block = fh.read(1 << 20)
        if not block:
            return None
        found = (tail + block).find(BOUNDARY)
        if found >= 0:
            return offset - len(tail) + found
        offset += len(block)
        tail = block[-(len(BOUNDARY) - 1) :]


def read_span(path: str, start: int, stop: int | None) -> tuple[Tables, Document | None, Counter]:
    """The tables of the events between two cuts (``start``: the offset of a cut's comma or
    of the array's ``[``; ``stop``: the next span's start, None: the end of the document)."""
    collect = Collector()
    with open(path, "rb") as fh:
        fh.seek(start + 1)
        remaining = None if stop is None else stop - start - 1
        tail = _feed(fh, bytearray(b"["), collect, remaining)
    if tail is not None and tail.traceEvents:
        tail.traceEvents = []  # (read into the tables already: not sent back)
    return collect.tables(), tail, collect.bad
